"""`run_student`: the `student` role answers each task `samples` times and a judge decides every attempt. The
difficulty filters read (answer, correct, retrieved_all_gold) per task, `correct` None for an unparseable reply.

A model student (an OpenAI-compatible endpoint) runs the run's own recipe: the same episode loop, grammar, prompts
and environment as the teacher, with the `student` role in the policy's seat (helper roles, e.g. a grounding
expert, stay the run's). So each rollout does its own retrieval (its own search queries; a one-turn recipe shows the
pages its question retrieves) and writes in the recipe's format. A reply the recipe cannot parse, to the end of the
episode, is recorded as "unparseable": neither right nor wrong. Calls go through the run's teacher pool and request
cache, so a re-run pays nothing twice.

Offline, the `extractive` student reads the text of the top-k pages the question retrieves and answers with the span
of the line that best matches the question. It never sees the gold answer, pages or boxes; its verdicts are real
decisions of a weak reader, labelled `student: extractive` wherever they are recorded.

Correctness is decided by the judge the caller passes (`vrag_data.teacher.judge.make_judge`: the configured model
judge, or the rule judge), never by a rule of this module."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vrag_data.config import SamplingConfig
from vrag_data.env.sanitize import sanitize_text
from vrag_data.errors import VragError
from vrag_data.filters.judging import judge_trajectories
from vrag_data.retrieve.base import Searcher
from vrag_data.rewards.answer import normalize_answer
from vrag_data.schema.records import Document, LayoutBlock, Message, Page, Provenance, Task, Trajectory
from vrag_data.store.workspace import Workspace
from vrag_data.synth.episode import EpisodeDeps, EpisodeRun, Reply, Responder, chat_reply, run_episode
from vrag_data.teacher.pool import TeacherPool

Outcome = Literal["right", "wrong", "unparseable"]
_NUM = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?%?")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.\-']*")


@dataclass(frozen=True)
class StudentAttempt:
    task_id: str
    sample: int
    answer: str
    outcome: Outcome
    retrieved_all_gold: bool
    student: str  # "model:<name>" or "extractive"
    pages: tuple[str, ...] = ()  # the pages this rollout retrieved, in the order first shown
    reason: str = ""  # the judge's reason, or why the reply could not be read

    @property
    def correct(self) -> bool | None:
        return None if self.outcome == "unparseable" else self.outcome == "right"

    def as_tuple(self) -> tuple[str, bool | None, bool]:
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


class StudentResponder(Responder):
    """The run's responder with the `student` role in the policy's seat, at the student's sampling settings."""

    def __init__(self, pool: TeacherPool, sampling: SamplingConfig | None, image_loader: Callable[..., bytes] | None) -> None:
        super().__init__(pool, None, image_loader)
        self.sampling = sampling

    def kind(self, role: str) -> str:
        return super().kind("student" if role == "policy" else role)

    async def ask(self, role: str, messages: list[Message], ep: EpisodeRun, phase: str) -> Reply:
        if role != "policy":
            return await super().ask(role, messages, ep, phase)
        assert self.pool is not None
        res = await self.pool.chat("student", messages, sample=ep.sample, sampling=self.sampling, image_loader=self.loader,
                                   affinity=f"student:{ep.task.task_id}:{ep.sample}")
        return chat_reply(res)  # the one door's verdict travels with the text


@dataclass
class StudentEnv:
    """What the model student's episodes share with the run: the configured recipe and the workspace's corpus."""

    ws: Workspace
    recipe: Any  # the run's configured `Recipe`
    layout: Mapping[str, list[LayoutBlock]]
    documents: Mapping[str, Document]
    run_id: str  # the student episodes' own run id (their trajectory ids differ from the teacher's)


def _unreadable(t: Trajectory) -> bool:
    # no answer and at least one reply the recipe could not parse: the student broke the format, it did not fail
    return t.final_answer is None and t.n_invalid > 0


async def _model_attempts(tasks: Sequence[Task], samples: int, searcher: Searcher, pages: Mapping[str, Page], env: StudentEnv,
                          pool: TeacherPool, judge: Any, sampling: SamplingConfig | None, label: str, concurrency: int,
                          image_loader: Callable[..., bytes] | None) -> list[StudentAttempt]:
    r = env.recipe
    prov = Provenance(recipe=r.name, policy="model", models={"policy": label}, prompt_hash=r.prompt_hash())
    deps = EpisodeDeps(ws=env.ws, run_id=env.run_id, recipe=r, searcher=searcher, pages=pages, layout=env.layout,
                       documents=env.documents, responder=StudentResponder(pool, sampling, image_loader), provenance=prov)
    sem = asyncio.Semaphore(concurrency)

    async def one(task: Task, k: int) -> Trajectory:
        async with sem:
            return await run_episode(deps, task, k)

    trajs = list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(samples))))
    failed = [t for t in trajs if t.status == "error"]
    if failed:  # an endpoint that failed for good: no attempt is made up
        raise VragError(f"roles.student: {len(failed)} of {len(trajs)} student rollouts failed ({failed[0].reason}); "
                        "check the student endpoint and re-run `vrag-data filter` (finished calls replay from the cache)")
    by_id = {t.task_id: t for t in tasks}
    scores, _ = await judge_trajectories([t for t in trajs if not _unreadable(t)], by_id, judge)
    out = []
    for t in trajs:
        gold = set(by_id[t.task_id].evidence_pages)
        answer = sanitize_text(" ".join((t.final_answer or "").split()))[:500]
        if _unreadable(t):
            outcome: Outcome = "unparseable"
            why = f"off format ({t.n_invalid} unreadable replies)"
        else:
            outcome = "right" if scores.get(t.traj_id, 0.0) >= 0.5 else "wrong"
            why = f"judge score {scores.get(t.traj_id, 0.0):.2f}" if t.final_answer is not None else f"no answer ({t.status})"
        out.append(StudentAttempt(t.task_id, t.sample, answer, outcome, bool(gold) and gold <= set(t.retrieved_pages), label,
                                  tuple(t.retrieved_pages), why))
    return out


async def _extractive_attempts(tasks: Sequence[Task], samples: int, searcher: Searcher, pages: Mapping[str, Page],
                               judge: Any, top_k: int) -> list[StudentAttempt]:
    out = []
    for task in tasks:
        # a one-turn reader: the pages its prompt's query (the question) retrieves
        shown = [h.page_id for h in searcher.search([task.question.strip()], top_k=top_k, doc_stem=None)[0] if h.page_id in pages][:top_k]
        gold = set(task.evidence_pages)
        for k in range(samples):
            answer = sanitize_text(" ".join(extractive_answer(task.question, [pages[p] for p in shown], k).split()))[:500]
            if not answer:
                out.append(StudentAttempt(task.task_id, k, "", "unparseable", bool(gold) and gold <= set(shown), "extractive",
                                          tuple(shown), "no answer span found"))
                continue
            j = await judge.judge(task.question, task.answer, answer, task.answer_format, sample=k)
            out.append(StudentAttempt(task.task_id, k, answer, "right" if j.correct else "wrong", bool(gold) and gold <= set(shown),
                                      "extractive", tuple(shown), j.reason))
    return out


async def run_student(
    tasks: Sequence[Task],
    samples: int,
    searcher: Searcher,
    pages: Mapping[str, Page],
    *,
    kind: str,
    judge: Any,
    env: StudentEnv | None = None,
    pool: Any = None,
    top_k: int = 3,
    temperature: float | None = None,
    model: str = "",
    concurrency: int = 16,
    image_loader: Any = None,
) -> list[StudentAttempt]:
    """Every (task, sample) attempt, judged by `judge`. `kind` "openai" runs the recipe of `env` with the pool's
    student role (VragError when its rollouts fail after the pool's retries); "extractive" reads page text."""
    if kind == "openai":
        if env is None or pool is None:
            raise VragError("roles.student: a model student needs the run's recipe and teacher pool")
        sampling = None
        if temperature is not None:
            base = pool.roles["student"].sampling if "student" in pool.roles else SamplingConfig()
            sampling = base.model_copy(update={"temperature": temperature})
        return await _model_attempts(tasks, samples, searcher, pages, env, pool, judge, sampling, f"model:{model}",
                                     concurrency, image_loader)
    return await _extractive_attempts(tasks, samples, searcher, pages, judge, top_k)
