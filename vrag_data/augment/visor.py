"""VISOR's two SFT augmentations: (a) every search query becomes the original question (no intent drift),
(b) a verification round before the answer: the answer turn becomes a search that shows an unseen page of
the same document, then a new final turn holds the verification reasoning and the original answer."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vrag_data.augment.base import AugmentError, Augmented, derive, render
from vrag_data.ids import short_hash
from vrag_data.schema.records import Action, ImageRef, Observation, Task, Trajectory, Turn

if TYPE_CHECKING:
    from vrag_data.env.grammar import Grammar

_SEARCH = re.compile(r"<search>.*?</search>", re.S)
_ANSWER = re.compile(r"<answer>.*?</answer>", re.S)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)

VERIFY_INTENT = "Before answering I will run one more search to check this against another page."
VERIFY_TEMPLATE = (  # the oracle augmenter's text; page ids never go into a trajectory's text
    "The extra page adds nothing that contradicts the evidence gathered so far, so the answer stands: {answer}."
)
VERIFY_SYSTEM = (
    "You verify an answer to a question about documents. You get the question, the evidence gathered so far, the "
    "proposed answer and one more page image from the same document. Reason inside <think></think> about whether "
    "this page confirms, contradicts or does not bear on the evidence, then repeat the final answer inside "
    "<answer></answer> (change it only if the page clearly contradicts the evidence)."
)
VERIFY_USER = "Question: {question}\nEvidence so far: {evidence}\nProposed answer: {answer}\nThe extra page is attached."
VerificationText = str | Callable[[Trajectory, Task, str], str] | None


def replace_queries(traj: Trajectory, task: Task, grammar: "Grammar | str | None" = None) -> Trajectory:
    """(a) Rewrite every <search> action's query to the task's question, in the action and in the text."""
    q = task.question.strip()
    turns = []
    n = 0
    for t in traj.turns:
        if t.action.kind == "search":
            n += 1
            think_m = _THINK.search(t.assistant)
            thought = t.action.thought or (think_m.group(1).strip() if think_m else "")
            action = t.action.model_copy(update={"query": q, "thought": thought})
            text = render(action, grammar or traj.recipe, _SEARCH.sub(lambda _m: f"<search>{q}</search>", t.assistant))
            t = t.model_copy(update={"assistant": text, "action": action})
        turns.append(t)
    if n == 0:
        raise AugmentError(f"trajectory {traj.traj_id}: no search action to rewrite")
    return derive(traj, "visor_query_rewrite", turns=turns)


def pick_unseen_page(traj: Trajectory, task: Task, doc_pages: Sequence[str], seed: int = 0) -> str:
    """A page of the evidence document that the episode never showed, chosen reproducibly per trajectory."""
    stem = (task.evidence_pages[0].rpartition("_")[0] if task.evidence_pages else
            (task.doc_stems[0] if task.doc_stems else ""))
    seen = set(traj.retrieved_pages) | set(traj.selected_pages)
    pool = sorted(p for p in doc_pages if p.rpartition("_")[0] == stem and p not in seen)
    if not pool:
        raise AugmentError(f"trajectory {traj.traj_id}: no unseen page left in document {stem!r}")
    rng = random.Random(int(short_hash(traj.traj_id, seed), 16))
    return rng.choice(pool)


def add_verification(
    traj: Trajectory,
    task: Task,
    doc_pages: Sequence[str],
    verification: VerificationText = None,
    seed: int = 0,
    grammar: "Grammar | str | None" = None,
    page: str | None = None,
) -> Trajectory:
    """(b) Insert a verification round before the answer.

    `doc_pages` lists the page ids of the task's document(s); `verification` is the teacher's reasoning
    about the new page (a string, or a callable(traj, task, page_id) that asks the teacher), else a template.
    `page`: the page the verification reasoning was written about (a caller that already showed the teacher
    a page passes it, so the record shows that very page); else one is picked for `traj`.
    """
    if not traj.turns or traj.turns[-1].action.kind != "answer" or traj.final_answer is None:
        raise AugmentError(f"trajectory {traj.traj_id}: does not end with an answer turn")
    last = traj.turns[-1]
    if page is None:
        page = pick_unseen_page(traj, task, doc_pages, seed)
    elif page in set(traj.retrieved_pages) | set(traj.selected_pages):
        raise AugmentError(f"trajectory {traj.traj_id}: verification page {page!r} was already shown in the episode")
    if callable(verification):
        reasoning = verification(traj, task, page)
    else:
        reasoning = verification or VERIFY_TEMPLATE.format(answer=traj.final_answer)
    think_m = _THINK.search(last.assistant)
    thought = (think_m.group(1).strip() + " " if think_m else "") + VERIFY_INTENT
    q = task.question.strip()
    search = Action(kind="search", thought=thought, query=q)
    search_turn = Turn(
        idx=last.idx,
        assistant=render(search, grammar or traj.recipe, f"<think>{thought}</think>\n<search>{q}</search>"),
        action=search,
        observation=Observation(kind="search", images=[ImageRef(page_id=page)]),
        role=last.role,
    )
    answer = Action(kind="answer", thought=reasoning, answer=traj.final_answer)
    answer_turn = Turn(
        idx=last.idx + 1,
        assistant=render(answer, grammar or traj.recipe, f"<think>{reasoning}</think>\n<answer>{traj.final_answer}</answer>"),
        action=answer,
        role=last.role,
    )
    return derive(
        traj,
        "visor_verification",
        turns=[*traj.turns[:-1], search_turn, answer_turn],
        retrieved_pages=[*traj.retrieved_pages, page],
        extra={"verification_page": page},
    )


def visor_augment(
    traj: Trajectory, task: Task, doc_pages: Sequence[str], verification: VerificationText = None, seed: int = 0,
    grammar: "Grammar | str | None" = None,
) -> Trajectory:
    """Both augmentations in the paper's order (queries first, then the verification round). The page is picked
    for the source trajectory once, and that page is the one the verification text is about and the record shows."""
    page = pick_unseen_page(traj, task, doc_pages, seed)
    out = add_verification(replace_queries(traj, task, grammar), task, doc_pages, verification, seed, grammar, page=page)
    return derive(traj, "visor_query_rewrite+verification", turns=out.turns, retrieved_pages=out.retrieved_pages,
                  extra={"verification_page": out.extra["verification_page"]})


def off_format(reply: str) -> str:
    """Why a verification reply breaks the format VERIFY_SYSTEM asks for ("" when it does not): one non-empty
    <think> with the reasoning, then one <answer>."""
    from vrag_data.rewards.format import tag_contents

    thinks, answers = tag_contents(reply, "think"), tag_contents(reply, "answer")
    if len(answers) != 1:
        return f"{len(answers)} <answer> tags, need exactly 1"
    if len(thinks) != 1 or not thinks[0].strip():
        return "no <think> reasoning" if not any(t.strip() for t in thinks) else f"{len(thinks)} <think> tags, need exactly 1"
    if not answers[0].strip():
        return "empty <answer>"
    if reply.find("<think>") > reply.find("<answer>"):
        return "<answer> comes before <think>"
    return ""


@dataclass(frozen=True)
class TeacherVerification:
    """VISOR's augmentation as the paper builds it (App. B): every search query becomes the question, then a
    random unseen page of the same document is shown and the TEACHER writes the verification reasoning from
    that page's image. The augmented trajectory replaces its source in the SFT data. A teacher whose answer
    changes on the new page does not confirm the evidence, and a reply off the asked format (no <think> reasoning,
    no single <answer>) is no verification: either way the trajectory is skipped, with the reason recorded."""

    name: str = "query_rewrite+teacher_verification"
    seed: int = 0
    replaces_source: bool = True

    async def apply_async(self, traj: Trajectory, task: Task, grammar: "Grammar", doc_pages: Mapping[str, Sequence[str]],
                          teacher: Any, *, judge: Any) -> Augmented:
        from vrag_data.rewards.format import last_tag, tag_contents
        from vrag_data.schema.records import Message

        pages = [p for stem in task.doc_stems for p in doc_pages.get(stem, [])]
        page = pick_unseen_page(traj, task, pages, self.seed)
        notes = [t.action.thought for t in traj.turns if t.action.thought][-3:]
        msgs = [Message(role="system", text=VERIFY_SYSTEM),
                Message(role="user", text=VERIFY_USER.format(question=task.question.strip(), evidence=" ".join(notes) or "(none)",
                                                            answer=traj.final_answer), images=[ImageRef(page_id=page)])]
        reply = await teacher(msgs, traj.sample, purpose="verification")
        problem = off_format(reply)
        if problem:  # an off-format reply is not verification reasoning: no record is built from it
            return Augmented(skipped=[f"{traj.traj_id}: the teacher's verification reply is off-format ({problem})"])
        said = last_tag(reply, "answer") or ""
        # the configured judge decides whether the restated answer is still the trajectory's answer
        same = await judge.judge(task.question, traj.final_answer or "", said, task.answer_format, sample=traj.sample)
        if not same.correct:
            return Augmented(skipped=[f"{traj.traj_id}: the teacher's answer changed on the extra page ({said!r}; "
                                      f"{getattr(judge, 'label', 'judge')}: {same.reason})"])
        from vrag_data.env.sanitize import sanitize_text

        reasoning = sanitize_text(" ".join(tag_contents(reply, "think")[-1].split()))
        if not reasoning:
            return Augmented(skipped=[f"{traj.traj_id}: the teacher wrote no verification reasoning"])
        # the page the teacher analysed is the page the record shows (not one re-picked for the rewritten copy)
        out = add_verification(replace_queries(traj, task, grammar), task, pages, reasoning, self.seed, grammar, page=page)
        aug = derive(traj, self.name, turns=out.turns, retrieved_pages=out.retrieved_pages,
                     extra={"verification_page": page, "augmented_by": getattr(teacher, "label", "teacher")})
        return Augmented([aug])
