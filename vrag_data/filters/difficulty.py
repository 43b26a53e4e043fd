"""Difficulty filters over a student's answers (pure: the student's runs are given, not made here).

`ctx.student_results[task_id]` lists the student's attempts: (answer, correct) or
(answer, correct, retrieved_all_gold). `correct` is None when the student's reply could not be read (off the
recipe's format): such an attempt is neither right nor wrong, so it never makes a task look hard. Rules, over
the judged attempts:
- `all_wrong`: keep tasks the student gets wrong (UniDoc-RL's difficulty-aware filter; with several
  attempts, every judged attempt must be wrong).
- `retrieved_but_wrong`: keep tasks where some judged attempt retrieved the gold pages yet answered wrong (UniDoc-RL
  RL curation: retrieval succeeds, reasoning/perception fails in at least one of n rollouts).
- `not_always_right`: drop tasks the student always gets right (EVisRAG curriculum filter: perfect-score items).
A task without any judged attempt is dropped: its difficulty is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vrag_data.filters.base import FilterContext, KeepPassed, verdict
from vrag_data.filters.registry import register_filter
from vrag_data.schema.role_need import RoleNeed
from vrag_data.schema.records import Trajectory, Verdict

Rule = Literal["all_wrong", "retrieved_but_wrong", "not_always_right"]


def student_accuracy(attempts: Sequence[tuple]) -> float | None:
    """Share of the judged attempts that were right (None: no attempt could be judged)."""
    judged = [a for a in attempts if a[1] is not None]
    return sum(1 for a in judged if a[1]) / len(judged) if judged else None


def difficulty_keep(rule: Rule, attempts: list[tuple]) -> tuple[bool, str]:
    """Pure decision for one task; returns (keep, reason)."""
    judged = [a for a in attempts if a[1] is not None]
    n_bad = len(attempts) - len(judged)
    n, n_ok = len(judged), sum(1 for a in judged if a[1])
    acc = f"student {n_ok}/{n} correct" + (f", {n_bad} unparseable" if n_bad else "")
    if rule not in ("all_wrong", "retrieved_but_wrong", "not_always_right"):
        raise ValueError(f"unknown difficulty rule {rule!r}; known: all_wrong, retrieved_but_wrong, not_always_right")
    if not judged:  # an off-format student says nothing about difficulty
        return False, acc + ": no reply could be judged (difficulty unknown)"
    if rule == "all_wrong":
        return n_ok == 0, acc + ("" if n_ok == 0 else ": too easy")
    if rule == "not_always_right":
        return n_ok < n, acc + (": always right" if n_ok == n else "")
    flags = [a[2] if len(a) > 2 else None for a in judged]
    if all(f is None for f in flags):
        return False, acc + ": retrieval success of the attempts not recorded"
    hits = [a for a, f in zip(judged, flags) if f]
    if not hits:
        return False, acc + ": no attempt retrieved the gold pages (retrieval is the bottleneck)"
    wrong_hits = sum(1 for a in hits if not a[1])
    if wrong_hits == 0:
        return False, acc + f": all {len(hits)} attempts with gold retrieval answered right"
    return True, acc + f"; {wrong_hits} attempt(s) retrieved gold pages but answered wrong"


@dataclass
class Difficulty(KeepPassed):
    rule: Rule = "all_wrong"
    samples: int = 1  # student attempts per task (UniDoc-RL curation: 5; EVisRAG: 8)
    temperature: float | None = None  # the student's sampling temperature (None = its role's setting)
    top_k: int = 3  # pages the offline (extractive) student is shown; a model student runs the recipe's own loop
    # Without a student (no `roles.student`, or a gold-guided one): "fail" stops `vrag-data filter` with one line
    # naming the role; "keep" / "drop" pass / fail every item with a reason code saying the rule was not applied
    # (a fallback the config must ask for).
    missing: Literal["fail", "keep", "drop"] = "fail"
    name: str = "difficulty"

    def needs_roles(self) -> tuple[RoleNeed, ...]:
        """The student, unless `missing` says what to do without one (keep / drop, recorded in every verdict)."""
        return () if self.missing != "fail" else (RoleNeed("student", "missing: keep"),)

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        attempts = list(ctx.student_results.get(item.task_id, []))
        if not attempts:
            ok = self.missing == "keep"
            return verdict(item, self.name, ok, f"rule not applied: no student (missing: {self.missing}) for task {item.task_id}")
        keep, reason = difficulty_keep(self.rule, attempts)
        return verdict(item, self.name, keep, f"{self.rule}: {reason}", student_accuracy(attempts))


register_filter(Difficulty)
