"""Bridge from the async judges (`vrag_data.teacher.judge`) to the synchronous correctness filter: score
every trajectory once (bounded concurrency, cached by the teacher pool like any request), then hand the
filter a lookup. A judge that could not give a verdict is an error of the stage, not a verdict: with
`strict` (the default) `judge_trajectories` raises `JudgeFailed` naming the role, how many calls failed and
the first reason, after every other call finished (and was cached), so a re-run pays only for the failures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from vrag_data.errors import VragError
from vrag_data.filters.base import JudgeFn
from vrag_data.rewards.answer import INSUFFICIENT
from vrag_data.schema.records import Task, Trajectory
from vrag_data.teacher.cache import CacheWriteError

if TYPE_CHECKING:
    from vrag_data.teacher.judge import Judge


def reference_for(traj: Trajectory, task: Task) -> str:
    """What the answer is judged against: EVisRAG's insufficient contexts expect "insufficient to answer"."""
    return INSUFFICIENT if traj.extra.get("sufficient") is False else task.answer


class JudgeFailed(VragError):
    """Some trajectories could not be judged (endpoint down or unreadable replies)."""


async def judge_trajectories(
    trajs: Sequence[Trajectory], tasks: Mapping[str, Task], judge: "Judge", concurrency: int = 64, strict: bool = True,
    on_done: Callable[[], None] | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """(scores by traj_id, errors by traj_id) from `judge.judge(question, reference, prediction, format)`.
    With `strict`, a judge call that failed raises `JudgeFailed` once all calls are done. `on_done()` after each one."""
    sem = asyncio.Semaphore(concurrency)
    scores: dict[str, float] = {}
    errors: dict[str, str] = {}

    async def one(t: Trajectory) -> None:
        try:
            await judge_one(t)
        finally:
            if on_done is not None:
                on_done()

    async def judge_one(t: Trajectory) -> None:
        task = tasks.get(t.task_id)
        if task is None:
            errors[t.traj_id] = f"task {t.task_id} not found in the workspace"
            return
        if t.final_answer is None:  # nothing to judge: wrong, at no cost
            scores[t.traj_id] = 0.0
            return
        ref = reference_for(t, task)
        fmt = None if ref == INSUFFICIENT else task.answer_format
        async with sem:
            try:
                j = await judge.judge(task.question, ref, t.final_answer, fmt, sample=t.sample)
            except CacheWriteError:
                raise  # a verdict that cannot be kept would be paid for again: the stage stops
            except Exception as err:  # an endpoint that keeps failing must not stop the batch
                errors[t.traj_id] = f"{type(err).__name__}: {err}"
                return
        scores[t.traj_id] = float(j.score)

    await asyncio.gather(*(one(t) for t in trajs))
    failed = {k: v for k, v in errors.items() if not v.startswith("task ")}
    if strict and failed:
        first = next(iter(failed.values()))
        raise JudgeFailed(f"judge: {len(failed)} of {len(trajs)} trajectories could not be judged ({first}); fix the "
                          "judge endpoint (roles.judge) and re-run `vrag-data filter` (verdicts already given are cached), "
                          "or set `roles.judge: {kind: rules}` to judge with the rule scorers")
    return scores, errors


class JudgeLookup:
    """A `FilterContext.judge` that reads precomputed scores; `label` names who scored them ("rules", or
    "judge <model>" with its substitution), so each verdict says which judge decided."""

    def __init__(self, scores: Mapping[str, float], errors: Mapping[str, str] | None = None, label: str = "judge") -> None:
        self.scores, self.errors, self.label = dict(scores), dict(errors or {}), label

    def __call__(self, traj: Trajectory, task: Task) -> float:
        if traj.traj_id in self.scores:
            return self.scores[traj.traj_id]
        raise LookupError(f"judge failed for {traj.traj_id}: {self.errors.get(traj.traj_id, 'not judged')}")


def judge_lookup(scores: Mapping[str, float], errors: Mapping[str, str] | None = None, label: str = "judge") -> JudgeFn:
    """A `FilterContext.judge` that reads precomputed scores (see `JudgeLookup`)."""
    return JudgeLookup(scores, errors, label)
