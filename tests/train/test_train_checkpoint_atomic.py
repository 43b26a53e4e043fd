"""A train killed while it writes a checkpoint: the next run resumes from the last whole checkpoint and finishes.

Checkpoints are written into `checkpoint-<step>.tmp-<pid>` and renamed once complete (marker file last). What a kill
leaves behind (a temp folder, or an older version's `checkpoint-<step>` missing files) is never resumed from."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")
from typer.testing import CliRunner

from vrag_data.train.checkpoint import COMPLETE

TINY_SFT = Path(__file__).resolve().parents[2] / "configs" / "train" / "tiny-sft.yaml"


def _train(export: Path, out: Path, steps: int, *extra: str):
    from vrag_data.cli.main import app

    return CliRunner().invoke(app, ["train", "sft", "--config", str(TINY_SFT), "--data", str(export),
                                    "--max-steps", str(steps), "--output", str(out),
                                    "--set", "sft.save_steps=2", *extra])


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_resume_passes_over_a_partial_checkpoint_and_a_stale_temp_folder(export, tmp_path):
    out = tmp_path / "out"
    first = _train(export, out, 4)
    assert first.exit_code == 0, first.output
    for step in (2, 4):
        assert (out / f"checkpoint-{step}" / COMPLETE).is_file()  # sealed: the marker is inside
    assert not list(out.glob("*.tmp-*"))  # the temp folders were renamed away
    # What a kill during the step-4 save left before: a checkpoint-4 with only some of its files (today's layout,
    # no marker), no final model; and a temp folder of a later save whose writer is gone.
    shutil.rmtree(out / "final")
    (out / "done.json").unlink()
    for f in list((out / "checkpoint-4").iterdir()):
        if f.name != "config.json":
            f.unlink() if f.is_file() else shutil.rmtree(f)
    stale = out / f"checkpoint-6.tmp-{_dead_pid()}"
    stale.mkdir()
    (stale / "config.json").write_text("{")
    again = _train(export, out, 6)
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 6
    assert summary["resumed_from"].endswith("checkpoint-2")  # the last whole checkpoint
    notices = [x for x in again.stderr.splitlines() if x.startswith("train: ")]
    assert any(stale.name in x and "removed" in x for x in notices), again.stderr
    assert any("checkpoint-4 is incomplete" in x for x in notices), again.stderr
    assert not stale.exists()
    # step 4 was trained again and its checkpoint now is whole; sft.save_total_limit (2) dropped checkpoint-2
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
    assert all((out / f"checkpoint-{step}" / COMPLETE).is_file() for step in (4, 6))
    assert (out / "final" / "config.json").is_file()


@pytest.mark.soak
def test_sigkill_while_a_checkpoint_is_written_then_resume(export, tmp_path):
    """A real `vrag-data train sft` killed with SIGKILL the moment its step-2 checkpoint folder appears (while the
    Trainer writes it); the next run resumes and finishes."""
    out = tmp_path / "killed"
    out.mkdir()
    cmd = [sys.executable, "-m", "vrag_data.cli.main", "train", "sft", "--config", str(TINY_SFT), "--data",
           str(export), "--max-steps", "4", "--output", str(out), "--set", "sft.save_steps=2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    killed_in = None
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            names = [e.name for e in os.scandir(out) if e.name.startswith("checkpoint-2")]
            if names:
                proc.send_signal(signal.SIGKILL)
                killed_in = names
                break
            time.sleep(0.0005)
    finally:
        if proc.poll() is None and killed_in is None:
            proc.kill()
        proc.wait()
    assert killed_in, f"the run ended before its first checkpoint: {proc.stderr.read()[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "done.json").exists()
    again = _train(export, out, 4)
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 4
    assert summary["resumed_from"] in (None, str(out / "checkpoint-2"))  # killed before or just after the rename
    assert not list(out.glob("*.tmp-*"))
    assert (out / "checkpoint-4" / COMPLETE).is_file() and (out / "final" / "config.json").is_file()
