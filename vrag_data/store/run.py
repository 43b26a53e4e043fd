"""`RunDir`: the one owner of a run folder's layout and of the rules for reading it.

Layout of `runs/<run_id>/`:
- `manifest.json`: the resolved config and the recipe's description (`RunManifest`),
- `trajectories/part-NNNNNN.parquet`: episodes as synth wrote them, in order; a (task, sample) may appear in
  several shards (an episode that ended in error and was rolled out again on resume): the newest record wins,
- `trajectories/part-NNNNNN~merged.parquet`: a compaction of the shards up to NNNNNN (`compact()`): it sorts
  right after `part-NNNNNN.parquet` and before `part-(NNNNNN+1)`, by name as in `part_files()`, so "newest wins"
  reads the same whether or not a compaction finished (a killed compaction leaves duplicates, never a gap),
- `trajectories/aug-<recipe>.parquet`: augmented trajectories written by `vrag-data filter`,
- `verdicts/filters.parquet`: every filter verdict; `verdicts/fingerprint.json`: which episodes they judged,
- `requests.sqlite`: the teacher request cache; `.lock`: one writer at a time.

Readers (filter, export, report, flows) go through this class, so they all see the same episodes. Verdicts
are fresh when the fingerprint equals the current set of newest episodes; after a resumed synth they are
stale and the export stops with one line instead of dropping the new episodes silently.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.schema.records import RunManifest, Trajectory
from vrag_data.store.shards import iter_records

TRAJ_DIR = "trajectories"
VERDICTS_DIR = "verdicts"
VERDICTS_FILE = f"{VERDICTS_DIR}/filters.parquet"
FINGERPRINT_FILE = f"{VERDICTS_DIR}/fingerprint.json"
_PART = re.compile(r"^part-(\d+)(~merged)?\.parquet$")
MERGED = "~merged"
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


def part_index(name: str) -> tuple[int, int]:
    """Sort key of an episode shard name: (index, 0) for a written shard, (index, 1) for a merged one."""
    m = _PART.match(name)
    if m is None:
        raise ValueError(f"{name}: not an episode shard name")
    return int(m.group(1)), 1 if m.group(2) else 0


class RunLock:
    """One writer per run folder; a second process gets a one-line error instead of interleaved shards.
    Local run folders only: `flock` is dropped by the kernel when the holder dies (kill -9)."""

    what = "another process is writing this run; wait for it or pick another --run"

    def __init__(self, run_dir: str | Path, name: str = ".lock") -> None:
        self.path = Path(run_dir) / name
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise VragError(f"{self.path.parent}: {self.what}") from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class ExportLock(RunLock):
    """One export at a time into an output folder (two would collide on its temporary files)."""

    what = "another export is writing this folder; wait for it or pass another --out"

    def __init__(self, out_dir: str | Path) -> None:
        super().__init__(out_dir, ".export.lock")


@dataclass
class Compaction:
    merged: str = ""  # the merged shard written ("" = nothing to do)
    shards: int = 0  # shards it replaced
    rows: int = 0  # episodes it holds (superseded records of the group dropped)
    removed_leftovers: int = 0  # shards a killed compaction had left behind


def fingerprint_of(newest: dict[Key, tuple[int, str, str]]) -> str:
    """Hash of the newest episodes' ids: what a set of verdicts was computed over."""
    return short_hash(sorted(trid for _, trid, _ in newest.values()), n=16)


class RunDir:
    """A run folder (local path or fsspec URL)."""

    def __init__(self, path: str) -> None:
        self.path = str(path).rstrip("/")
        self.fs, self._root = url_to_fs(self.path)
        self._newest: tuple[tuple[str, ...], dict[Key, tuple[int, str, str]]] | None = None

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
        """Episode shards in write order (by shard number; a merged shard right after the last one it covers)."""
        found = [(part_index(f.rsplit("/", 1)[-1]), f) for f in self._files(TRAJ_DIR) if _PART.match(f.rsplit("/", 1)[-1])]
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
        """(task, sample) -> (shard index, traj_id, status) of its newest record (read once per set of shards)."""
        files = tuple(self.part_files())
        if self._newest is not None and self._newest[0] == files:
            return self._newest[1]
        out: dict[Key, tuple[int, str, str]] = {}
        for i, f in enumerate(files):
            cols = self._read_columns(f, ["task_id", "sample", "traj_id", "status"])
            for tid, s, trid, st in zip(cols["task_id"], cols["sample"], cols["traj_id"], cols["status"], strict=True):
                out[(tid, int(s))] = (i, trid, st)
        self._newest = (files, out)
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

    # ------------------------------------------------------------------ compaction

    def compact(self, min_shards: int = 2) -> Compaction:
        """Merge the written shards after the last merged one into one merged shard (local run folders; takes the
        run lock). Readers see the same newest episodes before, during and after; a kill at any point loses
        nothing (the originals are removed only after the merged shard is in place, and leftovers are removed
        on the next call). Superseded records inside the group are dropped."""
        res = Compaction()
        with RunLock(self.path):
            parts = self.part_files()
            keys = [part_index(f.rsplit("/", 1)[-1]) for f in parts]
            merged_at = [k[0] for k in keys if k[1]]
            last_merged = max(merged_at, default=-1)
            for f, k in zip(parts, keys, strict=True):  # originals a killed compaction left behind
                if not k[1] and k[0] <= last_merged:
                    os.remove(f)
                    res.removed_leftovers += 1
            group = [f for f, k in zip(parts, keys, strict=True) if not k[1] and k[0] > last_merged]
            if len(group) < min_shards:
                return res
            res.rows, res.shards = self._merge(group), len(group)
            res.merged = group[-1].replace(".parquet", f"{MERGED}.parquet")
            for f in group:
                os.remove(f)
        return res

    def _merge(self, group: list[str]) -> int:
        last: dict[Key, tuple[int, str]] = {}
        for i, f in enumerate(group):
            cols = self._read_columns(f, ["task_id", "sample", "traj_id"])
            for tid, s, trid in zip(cols["task_id"], cols["sample"], cols["traj_id"], strict=True):
                last[(tid, int(s))] = (i, trid)
        final = Path(group[-1].replace(".parquet", f"{MERGED}.parquet"))
        tmp = final.with_name(f".tmp-{os.getpid()}-{final.name}")
        writer: pq.ParquetWriter | None = None
        rows = 0
        try:
            for i, f in enumerate(group):
                t = pq.read_table(f)
                keep = [last.get((tid, int(s))) == (i, trid) for tid, s, trid in
                        zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), t.column("traj_id").to_pylist(), strict=True)]
                t = t.filter(pa.array(keep, type=pa.bool_()))
                if writer is None:
                    writer = pq.ParquetWriter(tmp, t.schema, compression="zstd")
                writer.write_table(t.cast(writer.schema), row_group_size=64_000)
                rows += t.num_rows
            if writer is not None:
                writer.close()
                writer = None
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        finally:
            if writer is not None:
                writer.close()
            if tmp.exists():
                tmp.unlink()
        return rows
