"""`vrag-data run --runner ray` as a user types it: one Prefect server for the whole run (the temporary one the CLI
starts), however many Ray workers run shards; the workers run library stages only."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.support.roles import ORACLE_ROLES

BIN = Path(sys.executable).parent
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}


def prefect_servers(root: int) -> set[int]:
    """PIDs of processes serving Prefect's API (uvicorn on prefect.server's app, or `prefect server start`) among
    the descendants of `root`: other processes on the machine (another test, a user's own server) never count."""
    import psutil

    out = set()
    try:
        procs = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if ("prefect.server" in cmd and "uvicorn" in cmd) or "prefect server start" in cmd:
            out.add(p.pid)
    return out


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
def test_ray_workers_start_no_prefect_server(tmp_path):
    pytest.importorskip("prefect_ray")
    ws = tmp_path / "ws"
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws),
        "ingest": {"sample_corpus": 2, "ocr": "off", "workers": 1, "docs_per_shard": 1},
        "synth": {"recipes": ["vrag_rl"], "tasks_per_shard": 4},
        "roles": ORACLE_ROLES,
        "runner": {"kind": "ray", "max_concurrency": 2, "retries": 0},
    }))
    seen: set[int] = set()
    proc = subprocess.Popen([str(BIN / "vrag-data"), "run", "--config", str(cfg)], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample() -> None:  # a server lives for seconds (start-up alone takes ~1 s): 0.2 s sampling sees each one
        while not stop.is_set():
            seen.update(prefect_servers(proc.pid))
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        stop.set()
        t.join()
    run = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Error logging to API" not in run.stderr  # every log line reached the run's server before it stopped
    assert len(seen) == 1, f"{len(seen)} Prefect servers during the run (one expected: the CLI's temporary server)"
    import json

    shards = json.loads((ws / "pipeline.json").read_text())["shards"]
    workers = {s["result"]["worker"] for s in shards if s["stage"] == "synth" and s.get("result")}
    assert workers and all(w.rsplit(":", 1)[1] != str(proc.pid) for w in workers)  # shards ran on Ray workers, not the CLI
