"""Shared helpers for augmentations: every augmentation returns a new Trajectory with a new traj_id and
`extra["augmentation"]` naming what was done, and never mutates its input."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vrag_data.ids import short_hash
from vrag_data.schema.records import Action, Message, Task, Trajectory

if TYPE_CHECKING:
    from vrag_data.env.grammar import Grammar
    from vrag_data.teacher.judge import Judge


class AugmentError(ValueError):
    """An augmentation that cannot apply to this trajectory (recorded by the caller, batch goes on)."""


def derive(traj: Trajectory, augmentation: str, **changes: Any) -> Trajectory:
    """Copy of `traj` with `changes`, a content-derived id and provenance of the augmentation."""
    extra = {**traj.extra, **changes.pop("extra", {})}
    extra["augmentation"] = augmentation
    extra["source_traj_id"] = traj.traj_id  # the key the exporter follows to inherit verdicts
    new_id = "tr_" + short_hash(traj.traj_id, augmentation)
    return traj.model_copy(update={**changes, "traj_id": new_id, "extra": extra}, deep=True)


@dataclass
class Augmented:
    """What an augmentation made of one trajectory: new trajectories, and why some could not be built."""

    variants: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@runtime_checkable
class Augmentation(Protocol):
    """One augmentation a recipe applies to its kept trajectories (`vrag-data filter` runs them).

    `grammar` is the recipe's action grammar (new turns are written in it); `doc_pages` maps a document stem
    to its page ids in page order. Raise `AugmentError` when the trajectory cannot be augmented."""

    name: str

    def apply(self, traj: Trajectory, task: Task, grammar: "Grammar", doc_pages: Mapping[str, Sequence[str]]) -> Augmented: ...


# The teacher an augmentation may ask: `await teacher(messages, sample, purpose=...)` -> reply text (`purpose`
# names the request: "verification", "evidence_answer"; an endpoint ignores it, the oracle augmenter needs it). It is the run's policy
# role (an endpoint through the pool and request cache), or the oracle augmenter offline; `teacher.label` says
# which ("model:<name>" / "oracle") and goes into each augmented trajectory's `extra["augmented_by"]`.
class Teacher(Protocol):
    label: str

    async def __call__(self, messages: list[Message], sample: int, purpose: str = "") -> str: ...


TeacherFor = Callable[[Task], Teacher]  # the teacher of a task (the oracle augmenter reads its gold)


@runtime_checkable
class TeacherAugmentation(Protocol):
    """An augmentation written by the teacher: `apply_async(traj, task, grammar, doc_pages, teacher, judge=judge)`;
    it may also declare `replaces_source = True` (the augmented copy replaces its source in the SFT data). `judge`
    is the run's configured judge (`vrag_data.teacher.judge.Judge`): every decision whether an answer is right
    goes through it, never straight to the rule scorers."""

    name: str

    async def apply_async(self, traj: Trajectory, task: Task, grammar: "Grammar", doc_pages: Mapping[str, Sequence[str]],
                          teacher: Teacher, *, judge: "Judge") -> Augmented: ...


def render(action: Action, grammar: "Grammar | str", fallback: str) -> str:
    """Canonical text of `action` in the recipe's grammar; `fallback` when the grammar cannot express it
    (an unknown recipe name, or an action kind the grammar lacks)."""
    from vrag_data.env.render import render_action

    try:
        return render_action(action, grammar)
    except ValueError:
        return fallback
