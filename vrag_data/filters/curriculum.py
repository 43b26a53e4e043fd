"""Filters that shape the RL data rather than judge a trajectory: which tasks go to RL rather than SFT, and in which
order the RL rows come.

- `TaskSplit`: a task is in the SFT part or the RL part: the tasks of the run ordered by a hash of their id (and a
  seed), the first `round(rl_share x n)` on the RL side. The cut is exact (10 tasks at 8:2 give 8 and 2; a hash
  threshold alone could give 10 and 0 on a small run) and both chains see the same tasks, so a recipe that puts
  `TaskSplit(part="sft")` in its SFT chain and `TaskSplit(part="rl")` (same share and seed) in its RL chain never
  trains on a task twice. A task of another split than `train` (a benchmark's test set imported with `--split
  test`) is evaluation data, not training data of either side: it passes both chains and is left out of the cut, so
  the export's `test` split holds the whole test set under SFT and RL alike.
- `RlOrder`: keeps every item and records its rank in the verdict's score (the export writes RL rows in that
  order): tasks whose trajectories the quality filters all rejected first (`first="quality_rejected"`), and/or
  simple before complex by the student's accuracy (`order="simple_first"`: most often right first).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vrag_data.errors import ConfigError
from vrag_data.filters.base import FilterContext, KeepPassed, verdict
from vrag_data.filters.registry import register_filter
from vrag_data.filters.difficulty import student_accuracy
from vrag_data.schema.records import Trajectory, Verdict

Part = Literal["sft", "rl"]


def _position(task_id: str, seed: str) -> float:
    """The first 8 bytes of sha256("<seed>|<task_id>") as a fraction of 2**64: a task's place in the split order."""
    return int(hashlib.sha256(f"{seed}|{task_id}".encode()).hexdigest()[:16], 16) / 2**64


def rl_tasks(task_ids: Sequence[str], rl_share: float, seed: str = "") -> set[str]:
    """The RL side of a split: the `round(rl_share x n)` distinct tasks first in the hash order."""
    ids = sorted(set(task_ids), key=lambda i: (_position(i, seed), i))
    return set(ids[:round(rl_share * len(ids))])


def _split(item: Trajectory, ctx: FilterContext) -> str:
    """The split of the item's task as imported (`train` for a task the context does not hold)."""
    task = ctx.tasks.get(item.task_id)
    return (task.split if task is not None else "") or "train"


@dataclass
class TaskSplit(KeepPassed):
    part: Part = "sft"  # the side this chain keeps
    rl_share: float = 0.2  # share of tasks on the RL side (EVisRAG: 8:2 SFT:RL)
    seed: str = ""
    name: str = "split"

    def __post_init__(self) -> None:
        if not 0.0 <= self.rl_share <= 1.0:
            raise ValueError(f"rl_share {self.rl_share} is outside 0..1")

    def score_all(self, items: Sequence[Trajectory], ctx: FilterContext) -> list[Verdict]:
        held = {t.task_id for t in items if _split(t, ctx) != "train"}
        ids = [t.task_id for t in items if t.task_id not in held]
        rl = rl_tasks(ids, self.rl_share, self.seed)
        n = len(set(ids))
        out = []
        for t in items:
            if t.task_id in held:
                out.append(verdict(t, self.name, True, f"a {_split(t, ctx)}-split task: evaluation data on both sides, "
                                                       "not cut"))
                continue
            side = "rl" if t.task_id in rl else "sft"
            out.append(verdict(t, self.name, side == self.part,
                               f"task on the {side} side ({n - len(rl)}:{len(rl)} of {n} tasks, {1 - self.rl_share:.0%}:"
                               f"{self.rl_share:.0%} split)"))
        return out


@dataclass
class RlOrder(KeepPassed):
    first: Literal["none", "quality_rejected"] = "none"
    order: Literal["none", "simple_first"] = "none"
    quality: tuple[str, ...] = ("structure", "correctness")  # the SFT chain's filters that count as quality
    name: str = "rl_order"

    def score_all(self, items: Sequence[Trajectory], ctx: FilterContext) -> list[Verdict]:
        # a task is quality-rejected when none of its trajectories passed the SFT chain's quality filters
        passed: dict[str, bool] = {}
        for t in items:
            bad = any(v.filter in self.quality and not v.passed for v in ctx.sft_verdicts.get(t.traj_id, ()))
            passed[t.task_id] = passed.get(t.task_id, False) or not bad
        rejected = {tid for tid, ok in passed.items() if not ok}

        def key(t: Trajectory) -> tuple:
            acc = student_accuracy(list(ctx.student_results.get(t.task_id, [])))
            head = 0 if self.first == "quality_rejected" and t.task_id in rejected else 1
            # simple first = the student's most often right first; unknown accuracy goes last
            simple = (-acc if acc is not None else 1.0) if self.order == "simple_first" else 0.0
            return head, simple, t.task_id, t.sample

        out = []
        for rank, t in enumerate(sorted(items, key=key)):
            acc = student_accuracy(list(ctx.student_results.get(t.task_id, [])))
            why = [f"rank {rank}"]
            if self.first == "quality_rejected":
                why.append("quality-rejected" if t.task_id in rejected else "quality-passed")
            if self.order == "simple_first":
                why.append("student accuracy " + ("unknown" if acc is None else f"{acc:.2f}"))
            out.append(verdict(t, self.name, True, "; ".join(why), float(rank)))
        return out


def check_split(recipe: str, sft: Sequence[Any], rl: Sequence[Any]) -> None:
    """SFT and RL task splits must cut the tasks the same way (same share, same seed) and keep opposite sides."""
    a = [f for f in sft if isinstance(f, TaskSplit)]
    b = [f for f in rl if isinstance(f, TaskSplit)]
    if not a or not b:
        return
    x, y = a[0], b[0]
    if (x.rl_share, x.seed) != (y.rl_share, y.seed) or x.part != "sft" or y.part != "rl":
        raise ConfigError(f"filters.options.{recipe}.split / filters.rl_options.{recipe}.split: the SFT chain's split "
                          f"(part {x.part}, rl_share {x.rl_share}, seed {x.seed!r}) and the RL chain's (part {y.part}, "
                          f"rl_share {y.rl_share}, seed {y.seed!r}) disagree; set the same rl_share and seed in both")


register_filter(TaskSplit)
register_filter(RlOrder)
