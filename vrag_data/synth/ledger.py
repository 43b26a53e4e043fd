"""Which (task, sample) episodes a run has finished: the trajectory shards themselves are the ledger.

A shard is written under a temporary name and renamed into place, so after any crash the set of done
keys is exactly the keys in complete shards. Keys are deduplicated on read as well (the newest shard
wins), which also lets a re-run replace an episode that ended in `error` once the endpoint is back.
Local run folders only: the lock uses `flock`, which the kernel drops when the holder dies (kill -9).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from vrag_data.schema.records import RunManifest, Trajectory
from vrag_data.store.run import TRAJ_DIR, RunDir, RunLock, part_index

__all__ = ["RunLock", "done_keys", "next_shard_index", "read_manifest", "read_trajectories", "shard_path", "shard_paths",
           "write_manifest"]

_SECRET = re.compile(r"(api[_-]?key|token|secret|password)", re.I)

Key = tuple[str, int]


def shard_paths(run_dir: str | Path) -> list[Path]:
    """Episode shards in write order (`RunDir.part_files`)."""
    return [Path(p) for p in RunDir(str(run_dir)).part_files()]


def next_shard_index(run_dir: str | Path) -> int:
    paths = shard_paths(run_dir)
    return part_index(paths[-1].name)[0] + 1 if paths else 0


def shard_path(run_dir: str | Path, index: int) -> Path:
    return Path(run_dir) / TRAJ_DIR / f"part-{index:06d}.parquet"


def done_keys(run_dir: str | Path, *, retry_errors: bool = True) -> set[Key]:
    """Keys with a trajectory in a complete shard; with `retry_errors`, keys whose newest record is an error
    do not count (they will be rolled out again)."""
    newest = RunDir(str(run_dir)).newest()
    return {k for k, (_, _, st) in newest.items() if not (retry_errors and st == "error")}


def read_trajectories(run_dir: str | Path) -> list[Trajectory]:
    """All episodes of a run, one per (task, sample): the newest shard's record wins (`RunDir.episodes`)."""
    return list(RunDir(str(run_dir)).episodes())


def scrub_secrets(obj: Any) -> Any:
    """Drop values under key-like names (`api_key`, `token`, ...) unless they name an env var (`*_env`)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if _SECRET.search(str(k)) and not str(k).endswith("_env") and isinstance(v, str) and v:
                out[k] = "<redacted>"
            else:
                out[k] = scrub_secrets(v)
        return out
    if isinstance(obj, list):
        return [scrub_secrets(v) for v in obj]
    return obj


def write_manifest(run_dir: str | Path, manifest: RunManifest) -> Path:
    """Write `run_dir/manifest.json` atomically (the resolved config, without secrets)."""
    path = Path(run_dir) / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = manifest.model_dump(mode="json")
    data["config"] = scrub_secrets(data["config"])
    tmp = path.with_name(f".tmp-{os.getpid()}-manifest.json")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    os.replace(tmp, path)
    return path


def read_manifest(run_dir: str | Path) -> RunManifest | None:
    return RunDir(str(run_dir)).manifest()
