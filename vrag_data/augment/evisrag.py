"""EVisRAG's context-size augmentation: one teacher trajectory over the top-k retrieved pages becomes
top-1..top-5 variants. A variant is sufficient iff every gold page is among its shown pages; otherwise
the target answer is "insufficient to answer" and the gold pages' evidence lines are absent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from dataclasses import dataclass

from vrag_data.augment.base import Augmented, derive, render
from vrag_data.env.grammar import OBSERVE_EVIDENCE_ANSWER, Grammar
from vrag_data.rewards.answer import INSUFFICIENT
from vrag_data.rewards.format import evidence_map, parse_evidence, tag_contents
from vrag_data.schema.records import Action, ImageRef, Task, Trajectory

NO_INFO = "no relevant information"
INSUFFICIENT_THINK = "The images shown do not contain all the evidence this question needs, so it cannot be answered from them."


ContextVariants = Augmented  # one variant per k that could be built, one reason per k that could not

def _teacher_evidence(traj: Trajectory, shown: Sequence[str]) -> dict[str, str]:
    """Evidence the teacher wrote, keyed by page id (from the action, else the <evidence> tag)."""
    last = traj.turns[-1]
    ev = evidence_map(last.action.evidence) if last.action.evidence else {}
    if not ev:
        block = tag_contents(last.assistant, "evidence")
        ev = parse_evidence(block[-1]) if block else {}
    return {shown[i - 1]: text for i, text in ev.items() if 1 <= i <= len(shown)}


def _is_no_info(text: str) -> bool:
    return text.strip().lower().rstrip(".") == NO_INFO


def context_variants(
    traj: Trajectory, task: Task, ranked_pages: Sequence[str] | None = None, ks: Iterable[int] = range(1, 6),
    grammar: Grammar = OBSERVE_EVIDENCE_ANSWER,
) -> ContextVariants:
    """Variants of `traj` over the top-k of `ranked_pages` (default: the pages the teacher saw).

    Evidence of a page comes from the teacher's own line for it; a gold page the teacher never saw has no
    known evidence, so a variant that would show it is skipped (and says so) rather than invented.
    """
    out = ContextVariants()
    if not traj.turns or traj.final_answer is None:
        out.skipped.append(f"trajectory {traj.traj_id}: no answer turn")
        return out
    seen = list(traj.extra.get("shown_pages") or traj.retrieved_pages)
    ranked = list(ranked_pages or seen)
    teacher_ev = _teacher_evidence(traj, seen)
    gold = set(task.evidence_pages)
    last = traj.turns[-1]
    think = (tag_contents(last.assistant, "think") or [last.action.thought])[-1]
    for k in ks:
        if k > len(ranked):
            out.skipped.append(f"top-{k}: only {len(ranked)} ranked pages")
            continue
        shown = ranked[:k]
        sufficient = gold <= set(shown)
        lines = []
        for i, page in enumerate(shown, 1):
            text = teacher_ev.get(page)
            if text is None:
                text = None if page in gold else NO_INFO
            lines.append((i, page, text))
        missing = [p for _, p, t in lines if t is None]
        if missing:
            out.skipped.append(f"top-{k}: no teacher evidence for gold page(s) {missing}")
            continue
        relevant = [i for i, _, t in lines if not _is_no_info(t)]
        answer = traj.final_answer if sufficient else INSUFFICIENT
        observe = (
            f"{k} image(s) shown; relevant content in image(s) {relevant}."
            if relevant
            else f"{k} image(s) shown; none of them holds content relevant to the question."
        )
        evidence = [t for _, _, t in lines]  # one line per image, index = position (the grammar's convention)
        reasoning = think if sufficient else INSUFFICIENT_THINK
        action = Action(kind="answer", observe=observe, evidence=evidence, thought=reasoning, answer=answer)
        fallback = (
            f"<observe>{observe}</observe>\n<evidence>\n"
            + "\n".join(f"[{i}]: {t}" for i, t in enumerate(evidence, 1))
            + f"\n</evidence>\n<think>{reasoning}</think>\n<answer>{answer}</answer>"
        )
        turn = last.model_copy(update={"assistant": render(action, grammar, fallback), "action": action})
        # The shown pages go with the last user message (where the single-turn prompt puts its images).
        users = [i for i, m in enumerate(traj.prompt) if m.role == "user"]
        prompt = [
            m.model_copy(update={"images": [ImageRef(page_id=p) for p in shown]}) if users and i == users[-1] else m
            for i, m in enumerate(traj.prompt)
        ]
        out.variants.append(
            derive(
                traj,
                f"evisrag_top{k}",
                prompt=prompt,
                turns=[turn],
                retrieved_pages=shown,
                final_answer=answer,
                extra={"shown_pages": shown, "sufficient": sufficient, "top_k": k},
            )
        )
    return out


@dataclass(frozen=True)
class TeacherTopKVariants:
    """EVisRAG's context-size augmentation answered by the TEACHER: for k = 1..max_k the prompt is re-rendered
    for the top-k pages of the episode's ranking (`instruction` with `{k}` and `{question}`, so its text names
    the images it shows) and the teacher answers over them; a variant is kept when its answer is right for that
    context (the task's answer when every gold page is shown, else "insufficient to answer"), with the
    teacher's own observe/evidence/think text. The k whose pages are the source episode's own (top-3 by default)
    is not asked again: the source trajectory is that context's record."""

    instruction: str
    name: str = "teacher_topk_context_variants"
    max_k: int = 5

    async def apply_async(self, traj: Trajectory, task: Task, grammar: Grammar, doc_pages: Mapping[str, Sequence[str]],
                          teacher: Any, *, judge: Any) -> Augmented:
        from vrag_data.env.actions import parse_action
        from vrag_data.schema.records import Message

        out = Augmented()
        ranked = list(traj.extra.get("ranked_pages") or traj.extra.get("shown_pages") or traj.retrieved_pages)
        gold = set(task.evidence_pages)
        source_shown = list(traj.extra.get("shown_pages") or traj.retrieved_pages)
        for k in range(1, self.max_k + 1):
            if k > len(ranked):
                out.skipped.append(f"{traj.traj_id} top-{k}: only {len(ranked)} ranked pages")
                continue
            shown = ranked[:k]
            if shown == source_shown:  # the source episode is this context already: one record of it is enough
                out.skipped.append(f"{traj.traj_id} top-{k}: the source trajectory already shows these pages")
                continue
            sufficient = bool(gold) and gold <= set(shown)
            target = task.answer if sufficient else INSUFFICIENT
            prompt = [Message(role="user", text=self.instruction.format(k=k, question=task.question.strip()),
                              images=[ImageRef(page_id=p) for p in shown])]
            reply = await teacher(prompt, traj.sample * 16 + k, purpose="evidence_answer")
            action = parse_action(reply, grammar)
            if action.kind != "answer":
                out.skipped.append(f"{traj.traj_id} top-{k}: the teacher's reply is not a valid answer ({action.reason})")
                continue
            if len(action.evidence) != k:  # evidence is per image shown: a line for an image never shown is phantom
                out.skipped.append(f"{traj.traj_id} top-{k}: the teacher wrote {len(action.evidence)} evidence line(s) "
                                   f"for {k} image(s)")
                continue
            # the configured judge decides, as for the run's own trajectories
            verdict = await judge.judge(task.question, target, action.answer, None if not sufficient else task.answer_format,
                                        sample=traj.sample)
            if not verdict.correct:
                out.skipped.append(f"{traj.traj_id} top-{k}: the teacher answered {action.answer!r}, expected {target!r} "
                                   f"({getattr(judge, 'label', 'judge')}: {verdict.reason})")
                continue
            turn = traj.turns[-1].model_copy(update={"assistant": reply, "action": action, "observation": None})
            out.variants.append(derive(traj, f"evisrag_top{k}", prompt=prompt, turns=[turn], retrieved_pages=shown,
                                       final_answer=action.answer,
                                       extra={"shown_pages": shown, "sufficient": sufficient, "top_k": k,
                                              "augmented_by": getattr(teacher, "label", "teacher")}))
        return out
