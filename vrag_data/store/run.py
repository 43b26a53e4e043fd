"""`RunDir`: the one owner of a run folder's layout and of the rules for reading it.

Layout of `runs/<run_id>/`:
- `manifest.json`: the resolved config and the recipe's description (`RunManifest`),
- `trajectories/part-NNNNNN.parquet`: episodes as synth wrote them, in order; a (task, sample) may appear in
  several shards (an episode that ended in error and was rolled out again on resume): the newest record wins,
- `trajectories/aug-<recipe>.parquet`: augmented trajectories written by `vrag-data filter`,
- `verdicts/filters.parquet`: every filter verdict; `verdicts/fingerprint.json`: which episodes they judged,
- `requests.sqlite`: the teacher request cache; `.lock`: one writer at a time.

Readers (filter, export, report, flows) go through this class, so they all see the same episodes. Verdicts
are fresh when the fingerprint equals the current set of newest episodes; after a resumed synth they are
stale and the export stops with one line instead of dropping the new episodes silently.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.ids import short_hash
from vrag_data.schema.records import RunManifest, Trajectory
from vrag_data.store.shards import iter_records

TRAJ_DIR = "trajectories"
VERDICTS_DIR = "verdicts"
VERDICTS_FILE = f"{VERDICTS_DIR}/filters.parquet"
FINGERPRINT_FILE = f"{VERDICTS_DIR}/fingerprint.json"
_PART = re.compile(r"^part-(\d+)\.parquet$")
_SOURCE_KEYS = ("source_traj_id", "parent_traj_id")

Key = tuple[str, int]
VerdictState = Literal["missing", "fresh", "stale"]


@dataclass
class Verdicts:
    """Which trajectories passed every filter. Augmented trajectories without verdicts of their own inherit
    their source's (`extra["source_traj_id"]`)."""

    passed: dict[str, bool] = field(default_factory=dict)  # traj_id -> all verdicts passed
    present: bool = False

    @classmethod
    def load(cls, run_dir: str) -> "Verdicts":
        return RunDir(run_dir).verdicts()

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


def fingerprint_of(newest: dict[Key, tuple[int, str, str]]) -> str:
    """Hash of the newest episodes' ids: what a set of verdicts was computed over."""
    return short_hash(sorted(trid for _, trid, _ in newest.values()), n=16)


class RunDir:
    """A run folder (local path or fsspec URL)."""

    def __init__(self, path: str) -> None:
        self.path = str(path).rstrip("/")
        self.fs, self._root = url_to_fs(self.path)

    def __repr__(self) -> str:
        return f"RunDir({self.path!r})"

    def exists(self) -> bool:
        return self.fs.exists(self._root)

    # ------------------------------------------------------------------ layout

    def _files(self, sub: str) -> list[str]:
        d = f"{self._root}/{sub}"
        if not self.fs.isdir(d):
            return []
        return sorted(f for f in self.fs.ls(d, detail=False) if f.endswith(".parquet") and "/.tmp-" not in f)

    def part_files(self) -> list[str]:
        """Episode shards in write order (by shard number)."""
        found = [(int(m.group(1)), f) for f in self._files(TRAJ_DIR) if (m := _PART.match(f.rsplit("/", 1)[-1]))]
        return [f for _, f in sorted(found)]

    def augmented_files(self) -> list[str]:
        return [f for f in self._files(TRAJ_DIR) if f.rsplit("/", 1)[-1].startswith("aug-")]

    def verdict_files(self) -> list[str]:
        return self._files(VERDICTS_DIR)

    def manifest(self) -> RunManifest | None:
        p = f"{self._root}/manifest.json"
        if not self.fs.isfile(p):
            return None
        with self.fs.open(p, "rb") as f:
            return RunManifest.model_validate_json(f.read())

    # ------------------------------------------------------------------ episodes: newest record wins

    def _read_columns(self, path: str, columns: list[str]) -> dict[str, list]:
        with self.fs.open(path, "rb") as fh:
            t = pq.read_table(fh, columns=columns)
        return {c: t.column(c).to_pylist() for c in columns}

    def newest(self) -> dict[Key, tuple[int, str, str]]:
        """(task, sample) -> (shard index, traj_id, status) of its newest record."""
        out: dict[Key, tuple[int, str, str]] = {}
        for i, f in enumerate(self.part_files()):
            cols = self._read_columns(f, ["task_id", "sample", "traj_id", "status"])
            for tid, s, trid, st in zip(cols["task_id"], cols["sample"], cols["traj_id"], cols["status"], strict=True):
                out[(tid, int(s))] = (i, trid, st)
        return out

    def episodes(self) -> Iterator[Trajectory]:
        """One trajectory per (task, sample), the newest; one shard in memory at a time."""
        newest = self.newest()
        for i, f in enumerate(self.part_files()):
            for t in iter_records(f, Trajectory):
                cur = newest.get((t.task_id, t.sample))
                if cur is not None and cur[0] == i and cur[1] == t.traj_id:
                    yield t

    def augmented(self) -> Iterator[Trajectory]:
        for f in self.augmented_files():
            yield from iter_records(f, Trajectory)

    def trajectories(self) -> Iterator[Trajectory]:
        """What the exporter sees: the newest episodes, then the augmented trajectories."""
        yield from self.episodes()
        yield from self.augmented()

    def count(self) -> int:
        """Trajectories `trajectories()` yields (episodes de-duplicated, plus augmented ones)."""
        n = len(self.newest())
        for f in self.augmented_files():
            with self.fs.open(f, "rb") as fh:
                n += pq.ParquetFile(fh).metadata.num_rows
        return n

    # ------------------------------------------------------------------ verdicts and their freshness

    def fingerprint(self) -> str:
        return fingerprint_of(self.newest())

    def write_fingerprint(self, fingerprint: str, n_episodes: int) -> None:
        """Record which episodes the verdicts judged (local run folders; written after the verdicts)."""
        path = Path(self.path) / FINGERPRINT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
        tmp.write_text(json.dumps({"episodes": fingerprint, "n_episodes": n_episodes}))
        os.replace(tmp, path)

    def verdict_state(self) -> tuple[VerdictState, str]:
        """("missing" | "fresh" | "stale", why)."""
        if not self.verdict_files():
            return "missing", "no verdicts"
        p = f"{self._root}/{FINGERPRINT_FILE}"
        if not self.fs.isfile(p):
            return "stale", "verdicts written without a fingerprint (by an older version)"
        with self.fs.open(p, "rb") as f:
            stored = json.loads(f.read())
        newest = self.newest()
        if stored.get("episodes") == fingerprint_of(newest):
            return "fresh", ""
        return "stale", f"{len(newest)} episodes now, {stored.get('n_episodes', '?')} when the verdicts were written"

    def verdicts(self) -> Verdicts:
        files = self.verdict_files()
        v = Verdicts(present=bool(files))
        for f in files:
            cols = self._read_columns(f, ["traj_id", "passed"])
            for tid, ok in zip(cols["traj_id"], cols["passed"], strict=True):
                v.passed[tid] = v.passed.get(tid, True) and bool(ok)
        return v
