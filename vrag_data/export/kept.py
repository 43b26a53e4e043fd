"""Which trajectories of a run are kept: those with verdicts that all passed.

A run without any verdict file keeps every trajectory with status "answered" (with a warning). Augmented
trajectories (`extra["augmentation"]`) without verdicts of their own inherit their source's verdicts when
`extra` names the source (`source_traj_id` / `parent_traj_id`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.schema.records import Trajectory
from vrag_data.store.shards import iter_records

_SOURCE_KEYS = ("source_traj_id", "parent_traj_id")


def _parquet_files(folder: str) -> list[str]:
    fs, p = url_to_fs(folder)
    if not fs.exists(p):
        return []
    return sorted(f for f in fs.find(p) if f.endswith(".parquet") and "/.tmp-" not in f)


def trajectory_files(run_dir: str) -> list[str]:
    return _parquet_files(f"{run_dir}/trajectories")


def count_trajectories(run_dir: str) -> int:
    total = 0
    for f in trajectory_files(run_dir):
        fs, p = url_to_fs(f)
        with fs.open(p, "rb") as fh:
            total += pq.ParquetFile(fh).metadata.num_rows
    return total


@dataclass
class Verdicts:
    passed: dict[str, bool] = field(default_factory=dict)  # traj_id -> all verdicts passed
    present: bool = False

    @classmethod
    def load(cls, run_dir: str) -> "Verdicts":
        files = _parquet_files(f"{run_dir}/verdicts")
        v = cls(present=bool(files))
        for f in files:
            fs, p = url_to_fs(f)
            with fs.open(p, "rb") as fh:
                t = pq.read_table(fh, columns=["traj_id", "passed"])
            for tid, ok in zip(t.column("traj_id").to_pylist(), t.column("passed").to_pylist(), strict=True):
                v.passed[tid] = v.passed.get(tid, True) and bool(ok)
        return v

    def keep(self, traj: Trajectory) -> bool:
        if not self.present:
            return traj.status == "answered"
        if traj.traj_id in self.passed:
            return self.passed[traj.traj_id]
        if traj.extra.get("augmentation"):
            for k in _SOURCE_KEYS:
                src = traj.extra.get(k)
                if isinstance(src, str) and src in self.passed:
                    return self.passed[src]
        return False


def iter_trajectories(run_dir: str) -> Iterator[Trajectory]:
    """Every trajectory of the run, one shard in memory at a time."""
    for f in trajectory_files(run_dir):
        yield from iter_records(f, Trajectory)


def kept_trajectories(run_dir: str) -> list[Trajectory]:
    v = Verdicts.load(run_dir)
    return [t for t in iter_trajectories(run_dir) if v.keep(t)]
