"""Prefect layer cost: the synth flow on a config, cold (everything runs), warm (every shard cached), and cold
again with the shards on a local Ray instance; plus the Prefect overhead per shard task.

Run: .venv/bin/python bench/bench_flows.py [--config configs/demo.yaml] [--skip-ray]
Each mode uses a fresh temporary workspace (warm reuses the cold one) and one temporary Prefect server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
_TMP = Path(tempfile.mkdtemp(prefix="vrag-bench-flows-"))
os.environ.setdefault("PREFECT_HOME", str(_TMP / "prefect"))
for k, v in {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_API_HOST": "127.0.0.1", "HF_HUB_OFFLINE": "1",
             "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}.items():
    os.environ.setdefault(k, v)


def run(config: str, ws: Path, runner: str | None) -> dict:
    from flows.flows import synth

    t0 = time.perf_counter()
    summary = synth(config, workspace=str(ws), runner=runner)
    wall = time.perf_counter() - t0
    states: dict[str, dict[str, int]] = {}
    for s in summary["shards"]:
        d = states.setdefault(s["stage"], {})
        d[s["state"]] = d.get(s["state"], 0) + 1
    n = len(summary["shards"])
    trajs = sum(r.get("trajectories") or 0 for r in summary["report"]["summary"] if r["recipe"] != "(all)")
    return {"wall_s": round(wall, 1), "shard_tasks": n, "trajectories": trajs, "states": states}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO / "configs" / "demo.yaml"))
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    from prefect.testing.utilities import prefect_test_harness

    out = {}
    with prefect_test_harness(server_startup_timeout=300):
        ws = _TMP / "ws-local"
        out["cold_local"] = run(args.config, ws, "local")
        out["warm_local"] = run(args.config, ws, "local")
        out["warm_local"]["per_cached_shard_ms"] = round(1000 * out["warm_local"]["wall_s"] / out["warm_local"]["shard_tasks"], 1)
        if not args.skip_ray:
            out["cold_ray"] = run(args.config, _TMP / "ws-ray", "ray")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
