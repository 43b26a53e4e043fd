"""Filter plumbing: score, then keep. A filter scores one trajectory into a Verdict (every verdict is
recorded, pass or fail, with its reason); a set filter looks at the whole list at once (balancing,
de-duplication). `apply_chain` runs filters in order over the survivors of the previous one. A filter that cannot
run without a role (the difficulty filters' student) says so in `needs_roles()`, from its own settings, so the
entry points check the role before any episode is paid for (`vrag_data.teacher.roles.role_problems`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from vrag_data.schema.records import Task, Trajectory, Verdict
from vrag_data.schema.role_need import RoleNeed, role_needs  # noqa: F401  (re-exported)
from vrag_data.store.run import RunDir

# judge(traj, task) -> score in [0, 1]; a model judge (vrag_data.teacher.judge) or the rule scorer.
JudgeFn = Callable[[Trajectory, Task], float]
# Student attempts per task id: (answer, correct) or (answer, correct, retrieved_all_gold); correct None = unparseable.
StudentAttempt = tuple[str, bool | None] | tuple[str, bool | None, bool | None]


@dataclass
class FilterContext:
    tasks: Mapping[str, Task] = field(default_factory=dict)
    judge: JudgeFn | None = None
    student_results: Mapping[str, Sequence[StudentAttempt]] = field(default_factory=dict)
    page_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # page_id -> (width, height)
    # traj_id -> the SFT chain's verdicts; the RL chain reads which trajectories the quality filters rejected
    sft_verdicts: Mapping[str, Sequence[Verdict]] = field(default_factory=dict)

    def task(self, traj: Trajectory) -> Task:
        t = self.tasks.get(traj.task_id)
        if t is None:
            raise LookupError(f"task {traj.task_id} of trajectory {traj.traj_id} not found; pass the run's tasks")
        return t


def verdict(item: Trajectory, name: str, passed: bool, reason: str = "", score: float | None = None) -> Verdict:
    return Verdict(run_id=item.run_id, traj_id=item.traj_id, task_id=item.task_id, filter=name, passed=passed,
                   reason=reason, score=score)


@runtime_checkable
class Filter(Protocol):
    name: str

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict: ...

    def keep(self, verdict: Verdict) -> bool: ...


@runtime_checkable
class SetFilter(Protocol):
    name: str

    def score_all(self, items: Sequence[Trajectory], ctx: FilterContext) -> list[Verdict]: ...

    def keep(self, verdict: Verdict) -> bool: ...


class KeepPassed:
    """Default `keep`: the verdict's own pass flag."""

    def keep(self, verdict: Verdict) -> bool:
        return verdict.passed


AnyFilter = Filter | SetFilter


def judges_answers(f: object) -> bool:
    """A filter whose verdict is a judgement of the answer declares `judges_answers = True` (a class attribute); its
    verdicts carry the flag, and the report's judge figures count them whatever the filter is called."""
    return bool(getattr(f, "judges_answers", False))


class Chain(Protocol):
    """An ordered list of filters (`vrag_data.filters.registry.FilterChain`)."""

    filters: list[Any]


def _score_one(f: Filter, item: Trajectory, ctx: FilterContext) -> Verdict:
    try:
        return f.score(item, ctx)
    except Exception as err:  # bad record: recorded as a failed verdict, never stops the batch
        return verdict(item, f.name, False, f"error: {type(err).__name__}: {err}")


def apply_chain(
    trajs: Sequence[Trajectory],
    tasks: Mapping[str, Task] | Sequence[Task],
    chain: Chain,
    ctx: FilterContext | None = None,
) -> tuple[list[Trajectory], list[Verdict]]:
    """Run `chain` in order; returns (kept trajectories, every verdict of every filter that saw an item)."""
    ctx = ctx or FilterContext()
    task_map = tasks if isinstance(tasks, Mapping) else {t.task_id: t for t in tasks}
    if not ctx.tasks:
        ctx.tasks = task_map
    alive = list(trajs)
    verdicts: list[Verdict] = []
    for f in chain.filters:
        if hasattr(f, "score_all"):
            try:
                vs = f.score_all(alive, ctx)
            except Exception as err:
                vs = [verdict(t, f.name, False, f"error: {type(err).__name__}: {err}") for t in alive]
        else:
            vs = [_score_one(f, t, ctx) for t in alive]
        judging = judges_answers(f)
        vs = [v.model_copy(update={"judges_answer": judging}) for v in vs]
        by_id = {v.traj_id: v for v in vs}
        verdicts.extend(vs)
        alive = [t for t in alive if t.traj_id in by_id and f.keep(by_id[t.traj_id])]
    return alive, verdicts


def save_verdicts(run_dir: str, verdicts: Sequence[Verdict], name: str = "filters") -> str:
    """Write verdicts where the exporter reads them, with the fingerprint of the episodes they judged (the run's
    current newest episodes): `RunDir.write_verdicts`."""
    return RunDir(run_dir).write_verdicts(verdicts, name)
