"""Durable request cache and request log (SQLite in WAL mode, one file per run).

A response is committed before the caller sees it, so a crash (even kill -9) never loses a finished,
paid-for teacher call: re-running looks the key up and replays it as a cache hit. WAL with
synchronous=NORMAL survives process crashes (what we guard against) without an fsync per response.
Inside an event loop, `put_async` groups the responses that arrive in one loop iteration into one
transaction (group commit): each caller still waits for its commit, but a burst of 256 answers costs
one COMMIT instead of 256, which is what keeps the client's CPU per request under a millisecond.

The request log (one `RequestLog` row per call: ok / error / cached) lives in the same database and is
exported to `requests/part-<first>-<last>.parquet` shards for the report; the shard names carry the row
ids, so an export interrupted by a crash is redone without duplicates.

A write that fails (a full disk, a read-only folder) raises `CacheWriteError`, one line naming the cache and the fix:
the stage stops there instead of going on with answers it cannot keep (each would be paid for again on resume).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from vrag_data.errors import VragError
from vrag_data.schema.records import RequestLog
from vrag_data.store.run import RunDir
from vrag_data.store.shards import write_records

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  key TEXT PRIMARY KEY,
  model TEXT NOT NULL,
  text TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  latency_s REAL NOT NULL,
  finish_reason TEXT NOT NULL,
  created REAL NOT NULL,
  undecodable INTEGER NOT NULL DEFAULT 0,
  cut_from INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  row TEXT NOT NULL
);
"""


class CacheWriteError(VragError):
    """The request cache could not be written: the stage must stop (see the module doc), not record an episode error."""


@dataclass(frozen=True)
class CachedResponse:
    key: str
    model: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str
    undecodable: bool = False  # the reply's bytes were not all UTF-8 (the text holds U+FFFD in their place)
    cut_from: int = 0  # a runaway reply's length, when the text holds only its start (`teacher.pool.cut_runaway`)


class RequestCache:
    """`RequestCache(run_dir)` keeps the run's request cache and exports its log where `RunDir` says
    (`request_cache_path`, `request_log_dir`)."""

    def __init__(self, run_dir: str | Path, *, log_flush_rows: int = 5000) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        run = RunDir(str(self.run_dir))
        self.path = Path(run.request_cache_path)
        self.log_dir = Path(run.request_log_dir)
        self.log_flush_rows = log_flush_rows
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so each response is one durable commit.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except (sqlite3.Error, OSError) as err:
            self._db.close()
            raise self._write_error(err) from None
        self.broken = False  # a write failed: nothing more is written (close does not flush the log)
        self._pending_log = 0
        self._closed = False
        self._batch: list[tuple[CachedResponse | None, RequestLog | None, asyncio.Future[None] | None]] = []
        self._scheduled = False
        self.hits = 0
        self.misses = 0
        self.commits = 0

    def _migrate(self) -> None:
        """A cache written before the `undecodable` and `cut_from` columns gets them (its replies were kept whole)."""
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(responses)")}
        for col in ("undecodable", "cut_from"):
            if col not in cols:
                self._db.execute(f"ALTER TABLE responses ADD COLUMN {col} INTEGER NOT NULL DEFAULT 0")

    # -- responses -------------------------------------------------------------------------------------
    def get(self, key: str) -> CachedResponse | None:
        row = self._db.execute(
            "SELECT key, model, text, prompt_tokens, completion_tokens, latency_s, finish_reason, undecodable, cut_from "
            "FROM responses WHERE key=?",
            (key,),
        ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return CachedResponse(*row[:7], bool(row[7]), int(row[8]))

    def put(self, resp: CachedResponse, log: RequestLog | None = None) -> None:
        """Commit the response (and its log row) before returning: the durability point of a teacher call."""
        self._commit([(resp, log, None)])

    async def put_async(self, resp: CachedResponse, log: RequestLog | None = None) -> None:
        """Like `put`, group-committed with the other responses of this loop iteration; returns once durable."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._batch.append((resp, log, fut))
        self._schedule()
        await asyncio.shield(fut)  # a cancelled caller must not un-commit the batch

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._commit_batch)

    def _commit_batch(self) -> None:
        self._scheduled = False
        self._drain()

    def _drain(self) -> None:
        """Commit whatever is queued now and wake its waiters."""
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            self._commit(batch)
        except Exception as err:  # noqa: BLE001 - every waiter learns why its response is not durable
            for _, _, fut in batch:
                if fut is not None and not fut.done():
                    fut.set_exception(err)
            return
        for _, _, fut in batch:
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _commit(self, batch: list[tuple[CachedResponse | None, RequestLog | None, asyncio.Future[None] | None]]) -> None:
        now = time.time()
        responses = [(r.key, r.model, r.text, r.prompt_tokens, r.completion_tokens, r.latency_s, r.finish_reason, now,
                      int(r.undecodable), r.cut_from) for r, _, _ in batch if r]
        logs = [(lg.model_dump_json(),) for _, lg, _ in batch if lg is not None]
        try:
            with self._tx():
                if responses:
                    self._db.executemany("INSERT OR REPLACE INTO responses (key, model, text, prompt_tokens, completion_tokens, "
                                         "latency_s, finish_reason, created, undecodable, cut_from) VALUES (?,?,?,?,?,?,?,?,?,?)",
                                         responses)
                if logs:
                    self._db.executemany("INSERT INTO log(row) VALUES (?)", logs)
        except (sqlite3.Error, OSError) as err:
            self.broken = True
            raise self._write_error(err) from None
        self._pending_log += len(logs)
        self.commits += 1

    def _write_error(self, err: BaseException) -> CacheWriteError:
        return CacheWriteError(f"{self.path}: the request cache could not be written ({err}); free space on its disk (or make "
                               "the folder writable) and re-run the same command: the answers already cached are not paid for again")

    def keys(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT key FROM responses")}

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    # -- request log -----------------------------------------------------------------------------------
    def log(self, row: RequestLog) -> None:
        """Record a log row; inside an event loop it rides along with the next group commit."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._commit([(None, row, None)])
            return
        self._batch.append((None, row, None))
        self._schedule()

    def maybe_flush_log(self) -> None:
        if self._pending_log >= self.log_flush_rows:
            self.flush_log()

    def flush_log(self) -> int:
        """Export log rows not yet in a parquet shard; returns the number of rows written."""
        self._drain()  # rows queued for a group commit the loop may never run (it can close first)
        done = self._exported_upto()
        rows = self._db.execute("SELECT id, row FROM log WHERE id > ? ORDER BY id", (done,)).fetchall()
        self._pending_log = 0
        if not rows:
            return 0
        recs = [RequestLog.model_validate(json.loads(r)) for _, r in rows]
        write_records(str(self.log_dir / f"part-{rows[0][0]:012d}-{rows[-1][0]:012d}.parquet"), recs, RequestLog)
        return len(recs)

    def _exported_upto(self) -> int:
        last = 0
        if self.log_dir.is_dir():
            for p in self.log_dir.glob("part-*-*.parquet"):
                try:
                    last = max(last, int(p.stem.split("-")[2]))
                except (IndexError, ValueError):
                    continue
        return last

    def close(self) -> None:
        if self._closed:
            return
        try:
            if not self.broken:  # after a failed write the log stays in the database; the next run exports it
                self.flush_log()
        finally:
            self._closed = True
            self._db.close()

    # -- helpers ---------------------------------------------------------------------------------------
    def _tx(self) -> "_Tx":
        return _Tx(self._db)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error:
                self._rollback()  # a failed COMMIT (disk full) leaves the transaction open: close it, then report
                raise
        self._rollback()

    def _rollback(self) -> None:
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        except sqlite3.Error:  # the rollback of a failed write can fail the same way; the first error is the one to report
            pass
