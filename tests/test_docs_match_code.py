"""What the README and the shipped configs tell a user holds in the code: train configs found from any folder, the
demo's busy-port advice, notices apart from errors in the ingest summary, the tiny RL model's zeros explained, and
the 7B GRPO config pointing at verl."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.hostile import javascript_pdf
from vrag_data.cli.main import app
from tests.support.extras import needs_torch

REPO = Path(__file__).resolve().parents[1]


def _one_line(text: str) -> str:
    return " ".join(text.split())


@needs_torch
def test_train_config_of_the_readme_resolves_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the project folder: configs/train/... is not under it
    res = CliRunner().invoke(app, ["train", "rl", "--config", "configs/train/tiny-rl.yaml", "--set", "rl.group_sise=2"])
    # the shipped config was read: its validation names the misspelled key (before any model is built)
    assert res.exit_code == 2 and "group_sise" in res.output and "not found" not in res.output, res.output
    missing = CliRunner().invoke(app, ["train", "sft", "--config", "configs/train/no-such.yaml"])
    out = _one_line(missing.output)
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    assert str(tmp_path) in out and str(REPO / "configs" / "train") in out, out


def test_demo_on_a_busy_port_names_an_option_demo_has(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = CliRunner().invoke(app, ["demo", "--config", str(REPO / "configs" / "demo.yaml"), "-w", str(tmp_path / "ws"),
                                       "--port", str(port)])
    out = _one_line(res.output)
    assert res.exit_code == 2 and f"127.0.0.1:{port} is in use" in out and "pass --port" in out, out
    assert "No such option" not in out and "Traceback" not in res.output


def test_ingest_summary_counts_a_javascript_notice_as_a_notice_not_an_error(tmp_path):
    pdf = javascript_pdf(tmp_path / "scripted.pdf")
    res = CliRunner().invoke(app, ["ingest", str(pdf), "-w", str(tmp_path / "ws"), "--workers", "1", "--layout", "off",
                                   "--ocr", "off", "--quiet"])
    out = _one_line(res.output)
    assert res.exit_code == 0, out
    assert "contains JavaScript" in out and "ingested 1 document(s), 1 page(s)" in out
    assert "0 error(s), 1 notice(s)" in out, out


def test_7b_grpo_on_the_bundled_trainer_points_at_its_verl_config():
    """The README sends 7B GRPO to verl: a bundled 7B GRPO config says so and names a shipped verl config."""
    configs = sorted((REPO / "configs" / "train").glob("*7b-rl*.yaml"))
    bundled = [p for p in configs if "verl" not in yaml.safe_load(p.read_text())
               and yaml.safe_load(p.read_text())["rl"]["estimator"] == "grpo"]
    assert bundled  # qwen2.5-vl-7b-rl-vrag.yaml
    for path in bundled:
        header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("#"))
        named = re.findall(r"configs/train/(\S+-verl\.yaml)", header)
        assert "belongs to verl" in header and named, path.name
        assert all((REPO / "configs" / "train" / n).is_file() for n in named)
        assert "verl" in yaml.safe_load((REPO / "configs" / "train" / named[0]).read_text())


@pytest.mark.slow
def test_rl_on_the_tiny_model_says_its_zeros_are_expected(tmp_path):
    from tests.support.train_workspace import build_workspace

    ws, _ = build_workspace(tmp_path / "ws", size=(84, 56))
    res = CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs" / "train" / "tiny-rl.yaml"),
                                   "-w", str(ws.root), "--max-steps", "1", "--output", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    out = _one_line(res.output)
    assert "bundled tiny test model" in out and "of 0 are expected" in out, out
