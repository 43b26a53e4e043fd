"""The episode runner: n samples per task, a bounded pool of episodes, shards appended as episodes finish.

Exactly once across crashes: the done set is the keys in complete trajectory shards (see `ledger`). A
kill -9 loses at most the in-memory batch not yet flushed, and its teacher calls are in the request
cache, so rolling it out again costs nothing. An episode that raises becomes a trajectory with status
`error` and the reason; it never stops the run. The bound on episodes here is separate from the bound on
requests in flight per endpoint (the teacher pool's), so a few slow episodes do not starve the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from vrag_data.ids import traj_id
from vrag_data.schema.records import Provenance, RunManifest, Task, Trajectory, utcnow
from vrag_data.store.shards import write_records
from vrag_data.synth.ledger import RunLock, done_keys, next_shard_index, read_manifest, shard_path, write_manifest
from vrag_data.synth.progress import ProgressView, RunStats
from vrag_data.teacher.cache import CacheWriteError

Episode = Callable[[Task, int], Awaitable[Trajectory]]


class StatsSource(Protocol):
    """What feeds the bar live requests/s and tokens/s (a `TeacherPool`)."""

    def stats(self) -> dict[str, Any]: ...

__all__ = ["Episode", "RunStats", "error_trajectory", "run_episodes", "write_manifest"]


def error_trajectory(task: Task, sample: int, run_id: str, recipe: str, policy: Literal["oracle", "model"], reason: str) -> Trajectory:
    return Trajectory(
        traj_id=traj_id(run_id, task.task_id, sample), run_id=run_id, task_id=task.task_id, sample=sample, recipe=recipe,
        prompt=[], status="error", reason=" ".join(reason.split())[:500], provenance=Provenance(recipe=recipe, policy=policy),
    )


class _ShardWriter:
    def __init__(self, run_dir: Path, stats: RunStats) -> None:
        self.run_dir, self.stats = run_dir, stats
        self.buf: list[Trajectory] = []
        self.next = next_shard_index(run_dir)
        self.lock = asyncio.Lock()
        self.last = time.monotonic()

    def _take(self) -> tuple[Path, list[Trajectory]] | None:
        if not self.buf:
            return None
        batch, self.buf = self.buf, []
        path = shard_path(self.run_dir, self.next)
        self.next += 1
        self.last = time.monotonic()
        return path, batch

    async def flush(self, min_items: int = 1) -> None:
        """Write the buffer as one shard when it holds `min_items` or more by the time the lock is ours (a worker that
        waited behind another's flush finds the buffer it saw full already taken, and leaves the rest to fill)."""
        async with self.lock:
            job = self._take() if len(self.buf) >= min_items else None
            if job:
                await asyncio.to_thread(write_records, str(job[0]), job[1], Trajectory)  # atomic rename
                self.stats.shards += 1

    def flush_sync(self) -> None:
        """Last-chance flush on interrupt (no awaiting: the loop may be shutting down)."""
        job = self._take()
        if job:
            write_records(str(job[0]), job[1], Trajectory)
            self.stats.shards += 1


def _first_of_each_id(tasks: Sequence[Task]) -> list[Task]:
    """The tasks in order, the first of each id only."""
    seen: set[str] = set()
    out = []
    for t in tasks:
        if t.task_id not in seen:
            seen.add(t.task_id)
            out.append(t)
    return out


def _running_manifest(run_dir: Path, manifest: RunManifest, n_tasks: int, samples: int) -> RunManifest:
    """The manifest written as the run starts: its plan, status running, the first start's creation time kept."""
    prev = read_manifest(run_dir)
    manifest = manifest.model_copy(update={"n_tasks": n_tasks, "samples": samples, "status": "running",
                                           "created_at": prev.created_at if prev else manifest.created_at})
    write_manifest(run_dir, manifest)
    return manifest


def _recorded(episode: Episode, timeout_s: float | None, rid: str, recipe: str,
              policy: Literal["oracle", "model"]) -> Callable[[Task, int], Awaitable[Trajectory]]:
    """`episode` wrapped so that any failure (a timeout, an exception, a trajectory of another task or sample) becomes
    an error trajectory of its (task, sample), never a failure of the run; a cache that cannot be written stops it."""

    async def one(task: Task, s: int) -> Trajectory:
        try:
            coro = episode(task, s)
            traj = await (asyncio.wait_for(coro, timeout_s) if timeout_s else coro)
        except CacheWriteError:
            raise  # answers that cannot be kept would be paid for again: the stage stops (one line, the cache's fix)
        except Exception as err:  # noqa: BLE001 - any episode failure is recorded, never fatal to the run
            msg = str(err) or "no message"
            return error_trajectory(task, s, rid, recipe, policy, f"{type(err).__name__}: {msg}")
        if not isinstance(traj, Trajectory) or (traj.task_id, traj.sample) != (task.task_id, s):
            return error_trajectory(task, s, rid, recipe, policy, "episode returned a trajectory for another (task, sample)")
        return traj

    return one


async def run_episodes(
    tasks: Sequence[Task],
    samples: int,
    episode: Episode,
    run_dir: str | Path,
    concurrency: int = 64,
    progress: bool = True,
    flush_every: int = 64,
    flush_seconds: float = 5.0,
    *,
    run_id: str | None = None,
    recipe: str = "",
    policy: Literal["oracle", "model"] = "model",
    pool: StatsSource | None = None,
    manifest: RunManifest | None = None,
    retry_errors: bool = True,
    episode_timeout_s: float | None = None,
) -> RunStats:
    """Roll out every (task, sample) not yet in `run_dir/trajectories/`; see the module docstring.

    `pool` (anything with `.stats()`, e.g. a TeacherPool) feeds live requests/s and tokens/s to the bar.
    `manifest` is written to `run_dir/manifest.json` at the start and updated with the stats at the end.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rid = run_id or run_dir.name
    stats = RunStats()
    with RunLock(run_dir):
        done = done_keys(run_dir, retry_errors=retry_errors)
        # The plan is counted, not listed: tasks x samples pairs are produced one at a time as workers take them,
        # so a large `samples` costs no memory and no time before the first episode (and a signal is obeyed at once).
        unique = _first_of_each_id(tasks)
        ids = {t.task_id for t in unique}
        stats.planned = len(unique) * samples
        stats.skipped = sum(1 for tid, s in done if tid in ids and 0 <= s < samples)
        n_todo = stats.planned - stats.skipped

        if manifest is not None:
            manifest = _running_manifest(run_dir, manifest, len(ids), samples)
        writer = _ShardWriter(run_dir, stats)
        view = ProgressView(n_todo, progress, pool.stats if pool is not None else None, done_before=stats.skipped)
        t0 = time.monotonic()
        work = ((t, k) for t in unique for k in range(samples) if (t.task_id, k) not in done)

        one = _recorded(episode, episode_timeout_s, rid, recipe, policy)

        async def worker() -> None:
            for task, s in work:  # a shared iterator: each item goes to exactly one worker
                traj = await one(task, s)
                traj.finished_at = utcnow()
                writer.buf.append(traj)
                stats.add(traj)
                if len(writer.buf) >= flush_every:
                    await writer.flush(flush_every)

        async def ticker() -> None:
            while True:
                await asyncio.sleep(min(0.5, flush_seconds))
                stats.elapsed_s = time.monotonic() - t0
                view.update(stats)
                if writer.buf and time.monotonic() - writer.last >= flush_seconds:
                    await writer.flush()

        tick = asyncio.create_task(ticker())
        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, n_todo)))]
        status: Literal["running", "finished", "failed"] = "failed"
        try:
            await asyncio.gather(*workers)
            await writer.flush()
            status = "finished"
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "running"  # interrupted, not failed: a re-run resumes it
            raise
        finally:
            for w in [*workers, tick]:
                w.cancel()
            writer.flush_sync()
            stats.elapsed_s = time.monotonic() - t0
            _close_run(run_dir, stats, status, view, pool, manifest)
    return stats


def _close_run(run_dir: Path, stats: RunStats, status: Literal["running", "finished", "failed"], view: ProgressView,
               pool: StatsSource | None, manifest: RunManifest | None) -> None:
    """The last progress line and the manifest's final status and stats (replies that echoed a configured key, stored
    with a mark in its place, counted from the pool)."""
    if pool is not None:
        stats.redacted_replies = int(pool.stats().get("redacted_replies", 0))
    view.close(stats)
    if manifest is not None:
        write_manifest(run_dir, manifest.model_copy(update={"status": status, "stats": stats.as_dict(), "finished_at": utcnow()}))
