"""An export killed outright (kill -9) while it wrote over an earlier export: the next start of any stage puts the
earlier export back, file for file, and says so in one line; no temp file a killed stage left survives the next
stage that succeeds, while a live process's temp file is left alone."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app

pytestmark = pytest.mark.slow


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".export.lock"}


# the export runs in a process of its own and kills itself (SIGKILL: nothing of it runs after) at its second trajectory
KILLED_EXPORT = textwrap.dedent("""
    import os, signal, sys
    from vrag_data.export import export_run
    from vrag_data.recipe import get_recipe
    from vrag_data.store import Workspace
    seen = []
    def on_trajectory():
        seen.append(1)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    export_run(Workspace(sys.argv[1]), sys.argv[2], formats=["llamafactory", "hf"], on_trajectory=on_trajectory,
               recipes=[get_recipe("vrag_rl")])
""")


def _killed_export(ws: Path, run: str) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(ws), run], env=env, capture_output=True).returncode


def test_the_next_stage_puts_the_earlier_export_back_and_says_so(tmp_path_factory):
    ws = sample_workspace(tmp_path_factory.getbasetemp())
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "killed-export", "-q")
    cli("export", "-w", ws, "--run", "killed-export", "--format", "llamafactory")
    out = ws / "exports" / "killed-export"
    before = _digest(out)
    assert "summary.json" in before and any(k.startswith("llamafactory/") for k in before)

    assert _killed_export(ws, "killed-export") == -signal.SIGKILL
    # what kill -9 leaves: the earlier export set aside, the new one half written
    assert (out / ".previous-export").is_dir() and _digest(out) != before

    # any stage (here the report) starts by putting the earlier export back, and says so in one line
    res = CliRunner().invoke(app, ["report", "-w", str(ws), "--no-html"])
    assert res.exit_code == 0, res.output
    said = [line for line in res.output.splitlines() if "interrupted" in line]
    assert len(said) == 1 and str(out) in said[0] and "earlier export" in said[0], res.output
    assert not (out / ".previous-export").exists()
    assert _digest(out) == before  # file for file the earlier export
    # a second stage has nothing more to say
    again = CliRunner().invoke(app, ["report", "-w", str(ws), "--no-html"])
    assert again.exit_code == 0 and "interrupted" not in again.output


# a writer killed between writing its temp file and renaming it into place
KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys, uuid
    from pathlib import Path
    for final in map(Path, sys.argv[1:]):  # the writers' names: `.tmp-<pid>-[<hex>-]<name>`
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:12]}" if final.suffix == ".parquet" else str(os.getpid())
        final.with_name(f".tmp-{tag}-{final.name}").write_text("half")
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_no_temp_file_a_killed_stage_left_survives_the_next_stage(tmp_path_factory, tmp_path):
    ws = sample_workspace(tmp_path_factory.getbasetemp())
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "temp-left", "-q")
    finals = [ws / "runs" / "temp-left" / "manifest.json", ws / "tasks" / "qa-0123456789.parquet",
              ws / "pipeline.json", ws / "index" / "manifest.json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", KILLED_WRITER, *map(str, finals)], env=env, check=False)
    left = sorted(p.name for p in ws.rglob(".tmp-*"))
    assert len(left) == 4, left
    # a temp file of a process that still runs (a stage beside this one) is not touched
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        theirs = ws / "runs" / "temp-left" / f".tmp-{live.pid}-manifest.json"
        theirs.write_text("being written")
        # nor is one a writer on another machine sharing the workspace names with its host (its pid means nothing here)
        remote = ws / "runs" / "temp-left" / f".tmp-{live.pid + 1}-h000000-x.json"  # (a host whose tag is h000000)
        remote.write_text("being written elsewhere")
        cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "temp-left", "-q")
        assert sorted(ws.rglob(".tmp-*")) == sorted([theirs, remote])
    finally:
        live.kill()
        live.wait()
        theirs.unlink(missing_ok=True)
        remote.unlink(missing_ok=True)
