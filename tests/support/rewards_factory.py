"""Builders of small, realistic Task / Trajectory records for the reward, filter and augment tests."""

from __future__ import annotations

from typing import Any

from vrag_data.ids import task_id, traj_id
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import (
    Action, CropRecord, EvidenceBox, ImageRef, Message, Observation, Provenance, Task, Trajectory, Turn,
)

PAGE_W, PAGE_H = 1000, 1400


def make_task(question: str = "What was revenue in 2019?", answer: str = "42", fmt: str | None = "Int",
              pages: list[str] | None = None, boxes: dict[str, list[tuple]] | None = None, stem: str = "doc") -> Task:
    pages = ["doc_3"] if pages is None else pages
    ebs = [EvidenceBox(page_id=p, box=Box.from_norm(b, PAGE_W, PAGE_H)) for p, bs in (boxes or {}).items() for b in bs]
    return Task(task_id=task_id([stem], question), question=question, answer=answer, answer_format=fmt,
                doc_ids=[stem], doc_stems=[stem], evidence_pages=pages, evidence_boxes=ebs)


def make_traj(task: Task, steps: list[tuple], recipe: str = "vrag_rl", sample: int = 0, run: str = "run1",
              extra: dict[str, Any] | None = None) -> Trajectory:
    """steps: ("search", query, [pages]) | ("select", [indices], [pages]) | ("crop", page, (x1,y1,x2,y2) 0-1000)
    | ("answer", text) | ("invalid", raw text)."""
    turns, retrieved, selected, crops = [], [], [], []
    final = None
    n_invalid = 0
    for i, st in enumerate(steps):
        kind = st[0]
        if kind == "search":
            text = f"<think>look for it</think>\n<search>{st[1]}</search>"
            act = Action(kind="search", query=st[1])
            obs = Observation(kind="search", images=[ImageRef(page_id=p) for p in st[2]])
            retrieved += [p for p in st[2] if p not in retrieved]
        elif kind == "select":
            text = f"<think>pick</think>\n<select>{st[1]}</select>"
            act = Action(kind="select", indices=list(st[1]))
            obs = Observation(kind="select", images=[ImageRef(page_id=p) for p in st[2]])
            selected += st[2]
        elif kind == "crop":
            box = Box.from_norm(st[2], PAGE_W, PAGE_H)
            text = f"<think>zoom</think>\n<bbox>{list(st[2])}</bbox>"
            act = Action(kind="crop", boxes=[list(st[2])], page_ids=[st[1]])
            obs = Observation(kind="crop", images=[ImageRef(page_id=st[1], box=box)])
            crops.append(CropRecord(turn=i, page_id=st[1], box=box))
        elif kind == "answer":
            text = f"<think>done</think>\n<answer>{st[1]}</answer>"
            act, obs, final = Action(kind="answer", answer=st[1]), None, st[1]
        elif kind == "invalid":
            text, act, obs = st[1], Action(kind="invalid", reason="bad tags"), Observation(kind="error", text="retry")
            n_invalid += 1
        else:
            raise ValueError(kind)
        turns.append(Turn(idx=i, assistant=text, action=act, observation=obs))
    return Trajectory(
        traj_id=traj_id(run, task.task_id, sample), run_id=run, task_id=task.task_id, sample=sample, recipe=recipe,
        prompt=[Message(role="system", text="sys"), Message(role="user", text=task.question)],
        turns=turns, retrieved_pages=retrieved, selected_pages=selected, crops=crops, final_answer=final,
        status="answered" if final is not None else "max_turns", n_invalid=n_invalid,
        provenance=Provenance(recipe=recipe, policy="oracle"), extra=extra or {},
    )
