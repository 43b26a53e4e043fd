"""`run_student`: the `student` role answers each task `samples` times over the pages the index retrieves for
the question (top-k, the retrieval a one-turn student gets), and every attempt is scored against the reference.
The difficulty filters read (answer, correct, retrieved_all_gold) per task.

The student is an OpenAI-compatible endpoint (through the run's teacher pool and request cache: a re-run pays
nothing twice) or, offline, the `extractive` student: it reads the retrieved pages' text and answers with the
span of the line that best matches the question. It never sees the gold answer, pages or boxes; its verdicts are
real decisions of a weak reader, labelled `student: extractive` wherever they are recorded. Whether an attempt is
right is decided by the run's configured judge (a model, or the rule scorers when the config says `kind: rules`). Attempts are stored
in `runs/<run>/student/attempts.parquet` (written atomically once all are done; finished calls replay from the
cache on a re-run)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vrag_data.config import SamplingConfig
from vrag_data.env.sanitize import sanitize_text
from vrag_data.retrieve.base import Searcher
from vrag_data.rewards.answer import normalize_answer
from vrag_data.rewards.format import last_tag
from vrag_data.schema.records import ImageRef, Message, Page, Task

STUDENT_SYSTEM = ("Answer the question from the document page images. Reason briefly inside <think></think>, then give "
                  "only the final answer inside <answer></answer>.")
STUDENT_USER = "Question: {question}"
_NUM = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?%?")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.\-']*")


@dataclass(frozen=True)
class StudentAttempt:
    task_id: str
    sample: int
    answer: str
    correct: bool
    retrieved_all_gold: bool
    student: str  # "model:<name>" or "extractive"
    pages: tuple[str, ...] = ()

    def as_tuple(self) -> tuple[str, bool, bool]:
        return self.answer, self.correct, self.retrieved_all_gold


def extractive_answer(question: str, pages: Sequence[Page], sample: int = 0) -> str:
    """A closed-book-free, gold-free reader: the line of the pages sharing most words with the question, and in
    it the first number (or, without one, the first capitalised phrase) the question does not already contain.
    Sample k > 0 takes the k-th best line, so several samples disagree where the pages are ambiguous."""
    q = {w.lower() for w in _WORD.findall(question) if len(w) > 2}
    lines: list[tuple[int, int, str]] = []
    for pi, p in enumerate(pages):
        text = p.text if p.text.strip() else p.ocr_text
        for li, line in enumerate(x.strip() for x in text.splitlines()):
            if line:
                overlap = len(q & {w.lower() for w in _WORD.findall(line)})
                lines.append((-overlap, pi * 10_000 + li, line))
    if not lines:
        return ""
    lines.sort()
    line = lines[min(sample, len(lines) - 1)][2]
    qn = normalize_answer(question)
    for m in _NUM.finditer(line):
        if normalize_answer(m.group()) not in qn.split():
            return m.group().strip("$")
    caps = re.findall(r"(?:[A-Z][\w&\-']+\s?){1,4}", line)
    for c in caps:
        if normalize_answer(c) and normalize_answer(c) not in qn:
            return c.strip()
    words = _WORD.findall(line)
    return words[-1] if words else ""


async def _model_answer(pool: Any, task: Task, pages: list[str], sample: int, sampling: SamplingConfig | None,
                        image_loader: Any) -> str:
    msgs = [Message(role="system", text=STUDENT_SYSTEM),
            Message(role="user", text=STUDENT_USER.format(question=task.question.strip()), images=[ImageRef(page_id=p) for p in pages])]
    res = await pool.chat("student", msgs, sample=sample, sampling=sampling, image_loader=image_loader)
    return (last_tag(res.text, "answer") or res.text).strip()


async def run_student(
    tasks: Sequence[Task],
    samples: int,
    searcher: Searcher,
    pages: Mapping[str, Page],
    *,
    kind: str,
    judge: Any,
    pool: Any = None,
    top_k: int = 3,
    temperature: float | None = None,
    model: str = "",
    concurrency: int = 16,
    image_loader: Any = None,
) -> list[StudentAttempt]:
    """Every (task, sample) attempt. `kind` "openai" asks the pool's student role (TeacherError when it is down,
    after the pool's retries); "extractive" reads page text. `judge` (the run's configured judge,
    `vrag_data.teacher.judge.Judge`) decides whether each answer is right."""
    sem = asyncio.Semaphore(concurrency)
    sampling = None
    if kind == "openai" and temperature is not None:
        base = pool.roles["student"].sampling if pool is not None else SamplingConfig()
        sampling = base.model_copy(update={"temperature": temperature})
    label = f"model:{model}" if kind == "openai" else "extractive"

    # every sample of a task sees the same retrieval: one search per task, not per sample
    shown_of = {t.task_id: [h.page_id for h in searcher.search([t.question.strip()], top_k=top_k, doc_stem=None)[0]
                            if h.page_id in pages][:top_k] for t in tasks}

    async def one(task: Task, k: int) -> StudentAttempt:
        shown = shown_of[task.task_id]
        gold = set(task.evidence_pages)
        if kind == "openai":
            async with sem:
                answer = await _model_answer(pool, task, shown, k, sampling, image_loader)
        else:
            answer = extractive_answer(task.question, [pages[p] for p in shown], k)
        answer = sanitize_text(" ".join(answer.split()))[:500]
        ok = bool(answer) and (await judge.judge(task.question, task.answer, answer, task.answer_format, sample=k)).correct
        return StudentAttempt(task.task_id, k, answer, ok, bool(gold) and gold <= set(shown), label, tuple(shown))

    return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(samples))))
