"""A recipe defined in test code (`tests/support/toy_recipe.py`, no entry point, no library change) runs through
`vrag-data run` as a user types it, on threads and on Ray workers: the flow resolves it once and hands the object
to the shard tasks, so a worker never looks it up by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.roles import ORACLE_ROLES

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REF = "tests.support.toy_recipe:TOY"


def _run(tmp_path: Path, runner: str) -> tuple[subprocess.CompletedProcess, Path]:
    ws = tmp_path / "ws"
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws),
        "ingest": {"sample_corpus": 2, "ocr": "off", "workers": 1, "docs_per_shard": 1},
        "synth": {"recipes": [REF], "tasks_per_shard": 4},
        "roles": ORACLE_ROLES,
        "export": {"formats": ["hf", "verl"]},
        "runner": {"kind": runner, "max_concurrency": 2, "retries": 0},
    }))
    # the user's own module is importable the way Python finds any module: from PYTHONPATH (or installed)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([str(BIN / "vrag-data"), "run", "--config", str(cfg)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=900)
    return subprocess.CompletedProcess([str(proc.pid)], proc.returncode, out, err), ws


def _check(run: subprocess.CompletedProcess, ws: Path) -> list[dict]:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Error logging to API" not in run.stderr  # every log line reached the run's server before it stopped
    summary = json.loads((ws / "pipeline.json").read_text())
    assert list(summary["runs"]) == ["toy_crop"], summary["runs"]
    run_id = summary["runs"]["toy_crop"]
    rows = pq.read_table(ws / "runs" / run_id / "trajectories").to_pylist()
    assert rows and {r["recipe"] for r in rows} == {"toy_crop"}
    # the toy's own filter chain and augmentation ran on the worker that filtered the run
    aug = pq.read_table(ws / "runs" / run_id / "trajectories" / "aug-toy_crop.parquet").to_pylist()
    assert aug and all(json.loads(a["extra"]).get("augmentation") == "short_thoughts" for a in aug)
    verl = list((ws / "exports" / run_id / "verl").glob("*.parquet"))
    assert verl, "no verl export of the toy run"
    assert pq.read_table(verl[0]).column("data_source").to_pylist()[0] == "toy_source"  # the toy's export hint
    return [s for s in summary["shards"] if s["stage"] == "synth"]


@pytest.mark.soak
@pytest.mark.slow
def test_toy_recipe_by_reference_through_run_on_threads(tmp_path):
    run, ws = _run(tmp_path, "local")
    shards = _check(run, ws)
    assert shards and all(not s["failed"] for s in shards)


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
def test_toy_recipe_by_reference_through_run_on_ray_workers(tmp_path):
    pytest.importorskip("prefect_ray")
    run, ws = _run(tmp_path, "ray")
    shards = _check(run, ws)
    # each shard ran in a Ray worker process, not in the CLI process that resolved the recipe (its pid is args[0])
    workers = {s["result"]["worker"].rsplit(":", 1)[1] for s in shards if s.get("result")}
    assert workers and run.args[0] not in workers
