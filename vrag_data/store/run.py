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
- `filter-state.json`: the last filter run's state (running, failed with its reason, finished): the export refuses a
  run whose filter failed, was interrupted or still runs,
- `verdicts/rl/filters.parquet`: the RL chain's verdicts (which tasks become RL rows, their order), written by the
  same filter run before the fingerprint, so they are fresh exactly when `filters.parquet` is; absent = RL rows come
  from the SFT-kept trajectories,
- `student/attempts.parquet`, `student/rl-attempts.parquet`: the student's answers for the difficulty filters of
  the SFT and the RL chain,
- `requests.sqlite`: the teacher request cache, `requests/part-*.parquet`: its request log; `.lock`: one writer.

Writers and readers (synth, filter, export, report, flows) ask this class for every path, so no other module
spells the layout. Verdicts are fresh when the fingerprint equals the current set of newest episodes; after a
resumed synth they are stale: the export stops with one line and the report says so instead of counting kept
trajectories from verdicts that never saw the new episodes. The report's SQL gets "newest wins" from
`newest_shard_sql`, built from the same shard-name rule as `part_files()`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.errors import VragError
from vrag_data.process import pid_alive
from vrag_data.ids import short_hash
from vrag_data.schema.records import RunManifest, Trajectory, Verdict
from vrag_data.secrets import redact_url
from vrag_data.store.tempfiles import write_text_atomic
from vrag_data.store.shards import iter_records, write_records

TRAJ_DIR = "trajectories"
VERDICTS_DIR = "verdicts"
VERDICTS_FILE = f"{VERDICTS_DIR}/filters.parquet"
FINGERPRINT_FILE = f"{VERDICTS_DIR}/fingerprint.json"
FILTER_STATE_FILE = "filter-state.json"  # the last filter run: running | failed | finished (beside verdicts/)
EXPORT_SKIPS_FILE = "export-skipped.jsonl"  # what an export that wrote nothing stopped, with the reasons
MANIFEST_FILE = "manifest.json"
RL_VERDICTS_FILE = f"{VERDICTS_DIR}/rl/filters.parquet"
RL_ORDER_FILTER = "rl_order"  # the RL verdict whose score is the row's rank (`vrag_data.filters.curriculum.RlOrder`)
ATTEMPTS_FILE = "student/attempts.parquet"
RL_ATTEMPTS_FILE = "student/rl-attempts.parquet"
REQUEST_CACHE_FILE = "requests.sqlite"
REQUEST_LOG_DIR = "requests"
LOCK_FILE = ".lock"
AUG_PREFIX = "aug-"
# An episode shard's name; the one definition of write order, read by `part_index` and by `newest_shard_sql`.
PART_PATTERN = r"part-(\d+)(~merged)?\.parquet"
_PART = re.compile(f"^{PART_PATTERN}$")
MERGED = "~merged"
EPISODE_GLOB = "part-*.parquet"  # the same names as a glob (what a flow's cache key fingerprints)
_SECRET = re.compile(r"(api[_-]?key|token|secret|password)", re.I)
_URL = re.compile(r"(^|_)url$", re.I)  # base_url, judge_url: stored without userinfo or query values
_SOURCE_KEYS = ("source_traj_id", "parent_traj_id")

Key = tuple[str, int]
VerdictState = Literal["missing", "fresh", "stale"]
FilterStatus = Literal["running", "failed", "finished"]


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


@dataclass
class RlVerdicts:
    """Which trajectories the RL chain kept (one per task becomes its RL row) and in which order: the rank an
    `rl_order` verdict recorded (items without one keep their reading order, after the ranked ones)."""

    passed: dict[str, bool] = field(default_factory=dict)
    rank: dict[str, float] = field(default_factory=dict)

    def keep(self, traj: Trajectory) -> bool:
        return self.passed.get(traj.traj_id, False) and not traj.extra.get("augmentation")

    def order_key(self, traj_id: str, seen: int) -> tuple[float, int]:
        return self.rank.get(traj_id, float("inf")), seen


def part_index(name: str) -> tuple[int, int]:
    """Sort key of an episode shard name: (index, 0) for a written shard, (index, 1) for a merged one."""
    m = _PART.match(name)
    if m is None:
        raise ValueError(f"{name}: not an episode shard name")
    return int(m.group(1)), 1 if m.group(2) else 0


def newest_shard_sql(source: str) -> str:
    """SQL for the newest episode shard of each (run_id, task_id, sample) in `source` (a relation with those columns
    and `filename`, the shard's path): `part_index` in SQL, so the report's "newest wins" is `RunDir.newest()`'s.
    Files that are not episode shards (augmented trajectories) are left out."""
    pat = f"(^|/){PART_PATTERN}$"
    rank = f"CAST(regexp_extract(filename, '{pat}', 2) AS BIGINT) * 2 + CAST(regexp_extract(filename, '{pat}', 3) <> '' AS BIGINT)"
    return (f"SELECT run_id, task_id, sample, arg_max(filename, {rank}) AS filename FROM {source} "
            f"WHERE {is_episode_shard_sql('filename')} GROUP BY ALL")


def is_episode_shard_sql(column: str) -> str:
    """SQL: whether the path in `column` is an episode shard (not an augmented trajectory file)."""
    return f"regexp_matches({column}, '(^|/){PART_PATTERN}$')"


def stale_hint(run_id: str, why: str, workspace: str) -> str:
    """The one line shown wherever a run's verdicts are stale (`RunDir.verdict_state()`): report, HTML, summaries."""
    return f"run {run_id}: verdicts out of date ({why}): re-run `vrag-data filter -w {workspace} --run {run_id}`"


def scrub_secrets(obj: Any) -> Any:
    """Drop values under key-like names (`api_key`, `token`, ...) unless they name an env var (`*_env`); URLs under
    `*url` names lose their userinfo and query values (`vrag_data.secrets.redact_url`)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if _SECRET.search(str(k)) and not str(k).endswith("_env") and isinstance(v, str) and v:
                out[k] = "<redacted>"
            elif _URL.search(str(k)) and isinstance(v, str):
                out[k] = redact_url(v)
            else:
                out[k] = scrub_secrets(v)
        return out
    if isinstance(obj, list):
        return [scrub_secrets(v) for v in obj]
    return obj


def _replace_text(path: Path, text: str) -> None:
    """Write `path` under a temporary name and rename it into place (readers see the old or the new file; a failed
    write leaves no temp file)."""
    write_text_atomic(path, text)


class RunLock:
    """One writer per run folder; a second process gets a one-line error instead of interleaved shards.
    Local run folders only: `flock` is dropped by the kernel when the holder dies (kill -9)."""

    what = "another process is writing this run; wait for it or pick another --run"

    def __init__(self, run_dir: str | Path, name: str = LOCK_FILE) -> None:
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
    """One export at a time into an output folder (two would collide on its temporary files). The lock file is removed
    when the export ends, so a finished export holds none; a process that locked a file already removed (it opened
    it just before) finds the path gone or replaced and tries again on the file now there."""

    what = "another export is writing this folder; wait for it or pass another --out"

    def __init__(self, out_dir: str | Path) -> None:
        super().__init__(out_dir, ".export.lock")

    def __enter__(self) -> "ExportLock":
        for _ in range(10):
            super().__enter__()
            assert self._fd is not None
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    return self
            except FileNotFoundError:
                pass
            super().__exit__()  # the file this process locked was removed by the export that held it: lock the new one
        raise VragError(f"{self.path.parent}: {self.what}")

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)  # while still held: nobody else locks this file from now on
        super().__exit__(*exc)


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

    @property
    def run_id(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    # ------------------------------------------------------------------ layout: every path of a run folder

    def _at(self, rel: str) -> str:
        return f"{self.path}/{rel}"

    @property
    def trajectories_dir(self) -> str:
        return self._at(TRAJ_DIR)

    def shard_path(self, index: int) -> str:
        """The episode shard number `index` (synth writes them in increasing order)."""
        return self._at(f"{TRAJ_DIR}/part-{index:06d}.parquet")

    def next_shard_index(self) -> int:
        parts = self.part_files()
        return part_index(parts[-1].rsplit("/", 1)[-1])[0] + 1 if parts else 0

    @property
    def manifest_path(self) -> str:
        return self._at(MANIFEST_FILE)

    @property
    def verdicts_dir(self) -> str:
        return self._at(VERDICTS_DIR)

    @property
    def verdicts_path(self) -> str:
        """Where `vrag-data filter` writes its verdicts."""
        return self._at(VERDICTS_FILE)

    @property
    def fingerprint_path(self) -> str:
        return self._at(FINGERPRINT_FILE)

    def augmented_path(self, recipe: str) -> str:
        return self._at(f"{TRAJ_DIR}/{AUG_PREFIX}{recipe}.parquet")

    @property
    def student_attempts_path(self) -> str:
        return self._at(ATTEMPTS_FILE)

    def student_attempts_file(self, stage: str = "sft") -> str:
        """The student's attempts for the difficulty filters of the SFT ("sft") or the RL ("rl") chain."""
        return self._at(RL_ATTEMPTS_FILE if stage == "rl" else ATTEMPTS_FILE)

    @property
    def rl_verdicts_path(self) -> str:
        return self._at(RL_VERDICTS_FILE)

    @property
    def request_cache_path(self) -> str:
        return self._at(REQUEST_CACHE_FILE)

    @property
    def request_log_dir(self) -> str:
        return self._at(REQUEST_LOG_DIR)

    @property
    def lock_path(self) -> str:
        return self._at(LOCK_FILE)

    def lock(self) -> RunLock:
        """The run's writer lock (`with run.lock(): ...`)."""
        return RunLock(self.path)

    # ------------------------------------------------------------------ reading the layout

    def _files(self, sub: str) -> list[str]:
        d = f"{self._root}/{sub}"
        if not self.fs.isdir(d):
            return []
        # `ls` drops a remote URL's protocol; put it back so the paths open anywhere (DuckDB, url_to_fs)
        remote = "://" in self.path and not self.path.startswith("file://")
        prefix = self.path.split("://", 1)[0] + "://" if remote else ""
        return sorted(prefix + f for f in self.fs.ls(d, detail=False) if f.endswith(".parquet") and "/.tmp-" not in f)

    def part_files(self) -> list[str]:
        """Episode shards in write order (by shard number; a merged shard right after the last one it covers)."""
        found = [(part_index(f.rsplit("/", 1)[-1]), f) for f in self._files(TRAJ_DIR) if _PART.match(f.rsplit("/", 1)[-1])]
        return [f for _, f in sorted(found)]

    def augmented_files(self) -> list[str]:
        return [f for f in self._files(TRAJ_DIR) if f.rsplit("/", 1)[-1].startswith(AUG_PREFIX)]

    def verdict_files(self) -> list[str]:
        return self._files(VERDICTS_DIR)

    def request_log_files(self) -> list[str]:
        return self._files(REQUEST_LOG_DIR)

    def has_manifest(self) -> bool:
        return self.fs.isfile(f"{self._root}/{MANIFEST_FILE}")

    def manifest(self) -> RunManifest | None:
        p = f"{self._root}/{MANIFEST_FILE}"
        if not self.fs.isfile(p):
            return None
        with self.fs.open(p, "rb") as f:
            return RunManifest.model_validate_json(f.read())

    # ------------------------------------------------------------------ writers (local run folders)

    def write_manifest(self, manifest: RunManifest) -> str:
        """Write the manifest atomically: the resolved config, without secrets."""
        data = manifest.model_dump(mode="json")
        data["config"] = scrub_secrets(data["config"])
        _replace_text(Path(self._root) / MANIFEST_FILE, json.dumps(data, indent=2, ensure_ascii=False))
        return self.manifest_path

    def write_verdicts(self, verdicts: Iterable[Verdict], name: str = "filters",
                       judged: dict[Key, tuple[int, str, str]] | None = None) -> str:
        """Write a verdicts file and, after it, the fingerprint of the episodes they judged: `judged`, the
        `newest()` the caller read before judging (default: the newest episodes now). Both together, so a
        verdicts file is never fresh for episodes it did not see."""
        path = self._at(f"{VERDICTS_DIR}/{name}.parquet")
        write_records(path, list(verdicts), Verdict)
        episodes = self.newest() if judged is None else judged
        self.write_fingerprint(fingerprint_of(episodes), len(episodes))
        return path

    def write_rl_verdicts(self, verdicts: Iterable[Verdict] | None) -> str:
        """Write the RL chain's verdicts (call before `write_verdicts`, whose fingerprint covers both); None (the
        recipe has no RL chain) removes an earlier filter run's. Returns the path written, "" when none."""
        path = self.rl_verdicts_path
        if verdicts is not None:
            write_records(path, list(verdicts), Verdict)
            return path
        if self.fs.isfile(f"{self._root}/{RL_VERDICTS_FILE}"):
            self.fs.rm(f"{self._root}/{RL_VERDICTS_FILE}")
        return ""

    def rl_verdicts(self) -> RlVerdicts | None:
        """The RL keep-set and order; None when the run's filter wrote no RL chain (RL rows = SFT-kept trajectories)."""
        if not self.fs.isfile(f"{self._root}/{RL_VERDICTS_FILE}"):
            return None
        cols = self._read_columns(self.rl_verdicts_path, ["traj_id", "passed", "filter", "score"])
        v = RlVerdicts()
        for tid, ok, name, score in zip(cols["traj_id"], cols["passed"], cols["filter"], cols["score"], strict=True):
            v.passed[tid] = v.passed.get(tid, True) and bool(ok)
            if name == RL_ORDER_FILTER and score is not None:
                v.rank[tid] = float(score)
        return v

    def write_augmented(self, recipe: str, trajs: list[Trajectory]) -> str:
        """Replace the recipe's augmented trajectories; none removes an earlier filter run's (they no longer
        apply). Returns the path written, "" when none."""
        path = self.augmented_path(recipe)
        if trajs:
            write_records(path, trajs, Trajectory)
            return path
        if self.fs.isfile(path):
            self.fs.rm(path)
        return ""

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
        _replace_text(Path(self._root) / FINGERPRINT_FILE, json.dumps({"episodes": fingerprint, "n_episodes": n_episodes}))

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

    def mark_filter(self, status: FilterStatus, reason: str = "") -> None:
        """Record the state of this run's filter stage (local run folders): "running" when it starts, then
        "finished" after its verdicts, or "failed" with the one-line reason; the export reads it."""
        data = {"status": status, "pid": os.getpid(), "host": socket.gethostname(), "reason": reason[:500],
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _replace_text(Path(self._root) / FILTER_STATE_FILE, json.dumps(data))

    def write_export_skips(self, jsonl: str) -> str:
        """Keep the records an export stopped when it wrote nothing (no export folder holds its skipped.jsonl):
        `export-skipped.jsonl` in the run folder; returns its path."""
        p = f"{self._root}/{EXPORT_SKIPS_FILE}"
        with self.fs.open(p, "w") as f:
            f.write(jsonl)
        return f"{self.path}/{EXPORT_SKIPS_FILE}"

    def filter_state(self) -> tuple[str, str]:
        """("none" | "running" | "failed" | "interrupted" | "finished", detail) of the run's last filter: a filter
        marked running whose process is gone (on this host) was interrupted (killed, machine stopped)."""
        p = f"{self._root}/{FILTER_STATE_FILE}"
        if not self.fs.isfile(p):
            return "none", ""
        try:
            with self.fs.open(p, "rb") as f:
                d = json.loads(f.read())
        except (OSError, ValueError):
            return "failed", f"{p} is unreadable"
        status, at = str(d.get("status") or "failed"), str(d.get("at") or "?")
        if status == "running":
            pid, host = int(d.get("pid") or 0), str(d.get("host") or "")
            if host == socket.gethostname() and (pid <= 0 or not pid_alive(pid)):
                return "interrupted", f"started {at} by process {pid}, which is gone"
            return "running", f"process {pid} on {host or '?'}, since {at}"
        return status, str(d.get("reason") or "") + (f" ({at})" if status != "finished" else "")

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
        with self.lock():
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

