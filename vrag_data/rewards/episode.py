"""A neutral view of one episode and its gold labels, built from a Trajectory record (synthesis) or
from a verl rollout string (training). Every recipe's reward is computed on these two views, so the
two paths cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vrag_data.rewards.format import evidence_map, parse_evidence, tag_contents
from vrag_data.rewards.retrieval import dedup

if TYPE_CHECKING:  # the records are pydantic: the reward entry points import none of it
    from vrag_data.schema.records import Task, Trajectory


@dataclass
class Episode:
    texts: list[str]  # assistant texts, one per turn
    final_answer: str | None = None
    search_results: list[list[str]] = field(default_factory=list)  # per search action, pages in rank order
    selections: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (candidates, selected)
    crops: list[tuple[str, list[float]]] = field(default_factory=list)  # (page_id, 0-1000 box)
    read_pages: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)  # de-duplicated, order first shown
    shown_pages: list[str] = field(default_factory=list)  # EVisRAG: the images of the single turn
    evidence: dict[int, str] = field(default_factory=dict)  # EVisRAG: predicted "[i]: ..." (1-based)
    # False when nothing tells which pages the agent saw (a verl rollout without the agent loop's page lists and
    # with no page id in its text): rules that depend on retrieval (VISOR's honesty gate) are then not applied
    retrieval_known: bool = True


@dataclass
class Gold:
    answer: str
    answer_format: str | None = None
    question: str = ""
    pages: list[str] = field(default_factory=list)
    boxes: dict[str, list[list[float]]] = field(default_factory=dict)  # page_id -> 0-1000 boxes
    evidence: dict[int, str] | None = None  # EVisRAG gold "[i]: ..." per shown image, when known
    sufficient: bool | None = None  # EVisRAG sufficiency label, when known


def episode_from_trajectory(traj: Trajectory) -> Episode:
    ep = Episode(texts=[t.assistant for t in traj.turns], final_answer=traj.final_answer)
    last_candidates: list[str] = []
    for turn in traj.turns:
        a, obs = turn.action, turn.observation
        whole_pages = [im.page_id for im in obs.images if im.box is None] if obs else []
        if a.kind == "search":
            ep.search_results.append(whole_pages)
            last_candidates = whole_pages
        elif a.kind == "select":
            if obs and obs.kind == "select" and obs.images:
                chosen = [im.page_id for im in obs.images]
            else:  # indices are positions in the last candidate list (Action.indices)
                chosen = [last_candidates[i] for i in a.indices if 0 <= i < len(last_candidates)]
            ep.selections.append((list(last_candidates), chosen))
        elif a.kind == "read":
            ep.read_pages.extend(a.page_ids)
        if a.kind == "answer" and a.evidence:
            ep.evidence = evidence_map(a.evidence)
    ep.crops = [(c.page_id, [float(v) for v in c.box.norm]) for c in traj.crops]
    ep.retrieved = dedup(traj.retrieved_pages or [p for r in ep.search_results for p in r])
    ep.shown_pages = list(traj.extra.get("shown_pages") or ep.retrieved)
    if not ep.evidence and ep.texts:
        block = tag_contents(ep.texts[-1], "evidence")
        ep.evidence = parse_evidence(block[-1]) if block else {}
    return ep


def _gold_evidence(task: Task, shown: list[str]) -> dict[int, str] | None:
    """Per-image gold evidence of the shown pages: the text of the task's evidence boxes on a gold page, "no
    relevant information" on the others; None when a gold page has no box text (nothing to compare against)."""
    texts: dict[str, list[str]] = {}
    for eb in task.evidence_boxes:
        if eb.text.strip():
            texts.setdefault(eb.page_id, []).append(" ".join(eb.text.split()))
    gold = set(task.evidence_pages)
    out: dict[int, str] = {}
    for i, pid in enumerate(shown, 1):
        if pid in gold:
            if pid not in texts:
                return None
            out[i] = "; ".join(texts[pid])
        else:
            out[i] = "no relevant information"
    return out


def gold_from_task(task: Task, traj: Trajectory | None = None) -> Gold:
    boxes: dict[str, list[list[float]]] = {}
    for eb in task.evidence_boxes:
        boxes.setdefault(eb.page_id, []).append([float(v) for v in eb.box.norm])
    extra = traj.extra if traj is not None else {}
    gold_ev = extra.get("gold_evidence") or task.extra.get("gold_evidence")
    evidence = {int(k): str(v) for k, v in gold_ev.items()} if isinstance(gold_ev, dict) else None
    if evidence is None and extra.get("shown_pages"):
        evidence = _gold_evidence(task, list(extra["shown_pages"]))
    return Gold(
        answer=task.answer,
        answer_format=task.answer_format,
        question=task.question,
        pages=list(task.evidence_pages),
        boxes=boxes,
        evidence=evidence,
        sufficient=extra.get("sufficient"),
    )
