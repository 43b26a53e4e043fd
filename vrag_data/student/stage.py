"""The student stage of `vrag-data filter`: when a chain of the recipe (SFT or RL) holds a difficulty filter, the
configured student answers the run's tasks (once per chain, at that chain's samples and temperature) and the
filters get its attempts. No silent fallback: without a usable student
(none configured, or a gold-guided oracle) the stage stops with one line naming `roles.student`, unless every
difficulty filter asks for `missing: keep|drop`, which its verdicts then record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from vrag_data.config import RoleConfig
from vrag_data.errors import VragError
from vrag_data.filters.difficulty import Difficulty
from vrag_data.retrieve.build import load_index
from vrag_data.schema.records import LayoutBlock, Page, Task
from vrag_data.store.corpus import load_documents, load_layout
from vrag_data.store.run import RunDir
from vrag_data.store.shards import write_table_atomic
from vrag_data.store.workspace import Workspace
from vrag_data.student.run import StudentAttempt, StudentEnv, run_student
from vrag_data.synth.annotate import labelled_loader
from vrag_data.teacher.messages import workspace_image_loader

USABLE = ("openai", "extractive")


def student_problem(filters: Sequence[Any], roles: Mapping[str, RoleConfig]) -> str:
    """One line naming what is missing for the chain's difficulty filters ("" when nothing is): the filter stage's
    own check. The entry points check the same need before any work (`Difficulty.needs_roles`,
    `vrag_data.teacher.roles.role_problems`)."""
    diffs = [f for f in filters if isinstance(f, Difficulty)]
    role = roles.get("student")
    if not diffs or (role is not None and role.kind in USABLE) or not any(d.missing == "fail" for d in diffs):
        return ""
    what = "no roles.student" if role is None else f"roles.student is kind {role.kind!r} (gold-guided or not a model)"
    return (f"filter difficulty: {what}; point roles.student at the model to be trained (an OpenAI-compatible endpoint), "
            "or `roles.student: {kind: extractive}` for the offline reader, or set `filters.options.<recipe>.difficulty.missing: "
            "keep` to skip the rule (recorded in every verdict)")


async def student_results(filters: Sequence[Any], roles: Mapping[str, RoleConfig], pool: Any, ws: Workspace,
                          run_dir: Path, tasks: Sequence[Task], pages: Mapping[str, Page], recipe: Any, judge: Any,
                          stage: str = "sft") -> tuple[dict[str, list[tuple]], str]:
    """({task_id: [(answer, correct, retrieved_all_gold), ...]}, student label); ({}, "") without a difficulty filter.
    `recipe`: the run's configured recipe (a model student runs its loop); `judge`: decides every attempt; `stage`:
    which chain asks ("sft" | "rl"): its attempts are stored apart (`RunDir.student_attempts_file(stage)`)."""
    diffs = [f for f in filters if isinstance(f, Difficulty)]
    if not diffs:
        return {}, ""
    role = roles.get("student")
    problem = student_problem(filters, roles)
    if problem:
        raise VragError(problem)
    if role is None or role.kind not in USABLE:
        return {}, "none"
    if role.kind == "openai":
        await pool.check()
    model = role.endpoints[0].model if role.endpoints else ""
    rd = RunDir(str(run_dir))
    layout: dict[str, list[LayoutBlock]] = {}
    for b in load_layout(ws) if role.kind == "openai" else ():
        layout.setdefault(b.page_id, []).append(b)
    env = StudentEnv(ws, recipe, layout, {d.stem: d for d in load_documents(ws)} if role.kind == "openai" else {},
                     f"{rd.run_id}~student-{stage}")
    inner = workspace_image_loader(ws, max_pixels=recipe.max_pixels, crop_min_pixels=recipe.env.crop_min_pixels)
    attempts = await run_student(
        tasks, max(d.samples for d in diffs), load_index(ws), pages, kind=role.kind, judge=judge, env=env, pool=pool,
        top_k=max(d.top_k for d in diffs), temperature=next((d.temperature for d in diffs if d.temperature is not None), None),
        model=model, image_loader=labelled_loader(ws, inner, recipe.max_pixels))
    _write(rd.student_attempts_file(stage), attempts)
    out: dict[str, list[tuple]] = {}
    for a in attempts:
        out.setdefault(a.task_id, []).append(a.as_tuple())
    return out, (f"model:{model}" if role.kind == "openai" else "extractive")


def _write(path: str, attempts: Sequence[StudentAttempt]) -> None:
    t = pa.table({
        "task_id": [a.task_id for a in attempts], "sample": [a.sample for a in attempts],
        "answer": [a.answer for a in attempts], "correct": pa.array([a.correct for a in attempts], pa.bool_()),
        "outcome": [a.outcome for a in attempts], "reason": [a.reason for a in attempts],
        "retrieved_all_gold": [a.retrieved_all_gold for a in attempts], "student": [a.student for a in attempts],
        "pages": [list(a.pages) for a in attempts],
    })
    write_table_atomic(t, path)
