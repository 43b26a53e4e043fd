"""Which (task, sample) episodes a run has finished: the trajectory shards themselves are the ledger.

A shard is written under a temporary name and renamed into place, so after any crash the set of done
keys is exactly the keys in complete shards. Keys are deduplicated on read as well (the newest shard
wins), which also lets a re-run replace an episode that ended in `error` once the endpoint is back.
Local run folders only: the lock uses `flock`, which the kernel drops when the holder dies (kill -9).
"""

from __future__ import annotations

from pathlib import Path

from vrag_data.schema.records import RunManifest, Trajectory
from vrag_data.store.run import RunDir, RunLock, scrub_secrets

__all__ = ["RunLock", "done_keys", "next_shard_index", "read_manifest", "read_trajectories", "scrub_secrets", "shard_path",
           "shard_paths", "write_manifest"]

Key = tuple[str, int]


def shard_paths(run_dir: str | Path) -> list[Path]:
    """Episode shards in write order (`RunDir.part_files`)."""
    return [Path(p) for p in RunDir(str(run_dir)).part_files()]


def next_shard_index(run_dir: str | Path) -> int:
    return RunDir(str(run_dir)).next_shard_index()


def shard_path(run_dir: str | Path, index: int) -> Path:
    return Path(RunDir(str(run_dir)).shard_path(index))


def done_keys(run_dir: str | Path, *, retry_errors: bool = True) -> set[Key]:
    """Keys with a trajectory in a complete shard; with `retry_errors`, keys whose newest record is an error
    do not count (they will be rolled out again)."""
    newest = RunDir(str(run_dir)).newest()
    return {k for k, (_, _, st) in newest.items() if not (retry_errors and st == "error")}


def read_trajectories(run_dir: str | Path) -> list[Trajectory]:
    """All episodes of a run, one per (task, sample): the newest shard's record wins (`RunDir.episodes`)."""
    return list(RunDir(str(run_dir)).episodes())


def write_manifest(run_dir: str | Path, manifest: RunManifest) -> Path:
    """Write the run's manifest atomically (the resolved config, without secrets): `RunDir.write_manifest`."""
    return Path(RunDir(str(run_dir)).write_manifest(manifest))


def read_manifest(run_dir: str | Path) -> RunManifest | None:
    return RunDir(str(run_dir)).manifest()
