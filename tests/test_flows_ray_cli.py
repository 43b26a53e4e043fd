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

BIN = Path(sys.executable).parent
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}


def prefect_servers() -> set[int]:
    """PIDs of processes serving Prefect's API (uvicorn on prefect.server's app, or `prefect server start`)."""
    out = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ("prefect.server" in cmd and "uvicorn" in cmd) or "prefect server start" in cmd:
            out.add(int(d.name))
    return out


@pytest.mark.slow
def test_ray_workers_start_no_prefect_server(tmp_path):
    pytest.importorskip("prefect_ray")
    ws = tmp_path / "ws"
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws),
        "ingest": {"sample_corpus": 2, "ocr": "off", "workers": 1, "docs_per_shard": 1},
        "synth": {"recipes": ["vrag_rl"], "tasks_per_shard": 4},
        "roles": {"policy": {"kind": "oracle"}},
        "runner": {"kind": "ray", "max_concurrency": 2, "retries": 0},
    }))
    before = prefect_servers()
    seen: set[int] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.update(prefect_servers() - before)
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        run = subprocess.run([str(BIN / "vrag-data"), "run", "--config", str(cfg)], env=ENV, capture_output=True,
                             text=True, timeout=900)
    finally:
        stop.set()
        t.join()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert len(seen) == 1, f"{len(seen)} Prefect servers during the run (one expected: the CLI's temporary server)"
    import json

    shards = json.loads((ws / "pipeline.json").read_text())["shards"]
    workers = {s["result"]["worker"] for s in shards if s["stage"] == "synth" and s.get("result")}
    assert workers and all(w.rsplit(":", 1)[1] != str(os.getpid()) for w in workers)
