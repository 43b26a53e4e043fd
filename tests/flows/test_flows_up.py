"""`vrag-data up` -> `prefect deployment run vrag-data/synth --watch` -> outputs -> `vrag-data down`, all as
subprocesses the way a user types them, on a one-document sample corpus; plus the cheap checks of the
deployment definitions (serve.py and prefect.yaml agree) and of `down` with nothing running."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.roles import ORACLE_ROLES
from vrag_data.cli.main import app

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.is_file() and "State:\tZ" in status.read_text())


def test_prefect_yaml_matches_the_served_deployments():
    from flows.serve import DEPLOYMENT_NAMES, deployments

    served = {f"{d.flow_name}/{d.name}" for d in deployments()}
    assert served == set(DEPLOYMENT_NAMES)
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    declared = set()
    for d in spec["deployments"]:
        path, name = d["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, name)
        declared.add(f"{flow.name}/{d['name']}")
        assert d["work_pool"]["name"] == "vrag-process"
        assert "config" not in d["parameters"] or (REPO / d["parameters"]["config"]).is_file()
    assert declared == served
    # Prefect's CLI needs `<flow>/<deployment>`: the headline command is `prefect deployment run vrag-data/synth`
    assert "vrag-data/synth" in served


def test_down_without_up_says_nothing_was_running(tmp_path):
    res = CliRunner().invoke(app, ["down", "-w", str(tmp_path)])
    assert res.exit_code == 0 and "nothing was running" in res.output


def test_demo_config_is_valid_and_covers_every_recipe():
    from vrag_data.config import load_config
    from tests.support.shipped import SHIPPED as RECIPES

    cfg = load_config(REPO / "configs" / "demo.yaml")
    assert set(cfg.synth.recipes) == set(RECIPES)
    assert cfg.roles["policy"].kind == "oracle" and cfg.ingest.sample_corpus


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
def test_up_deployment_run_watch_then_down(tmp_path):
    ws = tmp_path / "ws"
    cfg = tmp_path / "one.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws),
        "ingest": {"sample_corpus": 1, "ocr": "off", "workers": 1},
        "synth": {"recipes": ["evisrag"]},
        "roles": {**ORACLE_ROLES, "student": {"kind": "extractive"}},
        "runner": {"max_concurrency": 2, "retries": 0},
    }))
    vrag = str(BIN / "vrag-data")
    up = subprocess.run([vrag, "up", "--config", str(cfg), "--port", str(_free_port())], cwd=REPO, env=CLEAN_ENV,
                        capture_output=True, text=True, timeout=400)
    state_file = ws / ".prefect" / "up.json"
    try:
        assert up.returncode == 0, up.stderr
        state = json.loads(state_file.read_text())
        api = state["api_url"]
        assert up.stdout.strip() == api and api.startswith("http://127.0.0.1:")
        assert "Prefect UI: http://127.0.0.1:" in up.stderr
        assert (ws / ".prefect" / "prefect.db").is_file()  # SQLite under the workspace
        pids = [state["server_pid"], state["serve_pid"]]
        assert all(_alive(p) for p in pids)
        # the UI reads where the API is from /ui-settings: it must name this server's port, not Prefect's 4200
        import httpx

        ui = httpx.get(f"{state['ui_url']}/ui-settings", timeout=10).json()
        assert ui["api_url"] == api, ui

        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "vrag-data/synth", "--param", f"config={cfg}", "--watch"],
            cwd=REPO, env={**CLEAN_ENV, "PREFECT_API_URL": api}, capture_output=True, text=True, timeout=600,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "Completed" in run.stdout + run.stderr
        summary = json.loads((ws / "pipeline.json").read_text())
        out = Path(summary["exports"]["evisrag"]["dir"])
        assert list((out / "hf" / "data").glob("sft-*.parquet")) and (out / "hf" / "README.md").is_file()
        assert (out / "llamafactory" / "dataset_info.json").is_file()
        assert list((out / "verl").rglob("*.parquet")) and list((out / "easyr1").rglob("*.jsonl"))
        assert (ws / "report.duckdb").is_file() and (ws / "report.html").is_file()

        # Prefect's own CLI against the server `up` started (the UI sends the same kind of filter requests)
        def prefect(*args: str) -> str:
            res = subprocess.run([str(BIN / "prefect"), *args], cwd=REPO, env={**CLEAN_ENV, "PREFECT_API_URL": api, "COLUMNS": "250"},
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, f"prefect {' '.join(args)}: {res.stdout[-2000:]}{res.stderr[-2000:]}"
            return res.stdout
        import re

        flow_run_id = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", run.stdout).group(0)
        assert "vrag-data/synth" in prefect("deployment", "ls")
        assert "COMPLETED" in prefect("flow-run", "ls")
        logs = prefect("flow-run", "logs", flow_run_id)
        assert "synth" in logs and "export evisrag" in logs
        # the tasks' own logs carry the stages' progress lines (counts, rate), not only "Completed"
        task_logs = httpx.post(f"{api}/logs/filter", json={"logs": {"task_run_id": {"is_null_": False}}, "limit": 200},
                               timeout=30).json()
        lines = [rec["message"] for rec in task_logs]
        assert any(m.startswith("ingest: ") and "/s" in m for m in lines), lines[:20]
        assert any(m.startswith("synth: ") and "/s" in m for m in lines), lines[:20]
        assert any(m.startswith("export ") and "(trajectories)" in m for m in lines), lines[:20]
        assert "synth-summary" in prefect("artifact", "ls")
        _flow_runs_in_the_ui(state["ui_url"], api, flow_run_id)
    finally:
        down = subprocess.run([vrag, "down", "--config", str(cfg)], cwd=REPO, env=CLEAN_ENV, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "stopped 2 process(es)" in down.stderr
    assert not any(_alive(p) for p in pids)
    assert not state_file.exists()


def _flow_runs_in_the_ui(ui_url: str, api: str, flow_run_id: str) -> None:
    """Prefect's UI in a real browser: the synth flow run shows its summary artifact, and its stages' flow run
    (synth-shards) lists the task runs of every stage, all Completed."""
    import httpx

    from tests.support.browser import browser_page, keep_screenshot

    shards = httpx.post(f"{api}/flow_runs/filter", json={"flows": {"name": {"any_": ["synth-shards"]}}, "limit": 1},
                        timeout=30).json()[0]["id"]
    with browser_page() as page:
        page.goto(f"{ui_url}/runs/flow-run/{flow_run_id}")
        page.locator("li#artifacts").click()
        page.get_by_text("synth-summary").first.wait_for()
        keep_screenshot(page, "prefect-synth-artifacts")
        page.goto(f"{ui_url}/runs/flow-run/{shards}")
        page.locator("li#task-runs").click()
        for name in ("ingest-shard", "build-index", "synth-shard", "judge-filter-augment", "export-run", "build-report"):
            page.get_by_text(name).first.wait_for()
        text = page.inner_text("body")
        keep_screenshot(page, "prefect-synth-task-runs")
    assert "Can't connect" not in text and "Failed" not in text, text[:2000]
    assert "Completed" in text


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
def test_a_failed_stage_says_why_in_watch_and_in_the_logs(tmp_path):
    """A stage that fails at run time (a tasks file that is not JSON: the config check only sees that it exists):
    `--watch` and `prefect flow-run logs` carry the one-line reason, not only "Failed"."""
    qa = tmp_path / "qa.jsonl"
    qa.write_text("this is not json\n")
    ws = tmp_path / "ws"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws), "ingest": {"sample_corpus": 1, "ocr": "off", "workers": 1}, "tasks": {"file": str(qa)},
        "synth": {"recipes": ["vrag_rl"]}, "roles": ORACLE_ROLES, "runner": {"retries": 0},
    }))
    vrag = str(BIN / "vrag-data")
    up = subprocess.run([vrag, "up", "--config", str(cfg), "--port", str(_free_port())], cwd=REPO, env=CLEAN_ENV,
                        capture_output=True, text=True, timeout=400)
    try:
        assert up.returncode == 0, up.stderr
        api = up.stdout.strip()
        env = {**CLEAN_ENV, "PREFECT_API_URL": api}
        run = subprocess.run([str(BIN / "prefect"), "deployment", "run", "vrag-data/synth", "--param", f"config={cfg}", "--watch"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        out = " ".join((run.stdout + run.stderr).split())
        assert run.returncode != 0 and "Failed" in out
        assert "failed: tasks import" in out and "no line of it is JSON" in out, out[-3000:]
        import re

        flow_run_id = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", run.stdout).group(0)
        logs = subprocess.run([str(BIN / "prefect"), "flow-run", "logs", flow_run_id], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert logs.returncode == 0 and "failed: tasks import" in " ".join(logs.stdout.split())
    finally:
        subprocess.run([vrag, "down", "--config", str(cfg)], cwd=REPO, env=CLEAN_ENV, capture_output=True, text=True, timeout=120)
