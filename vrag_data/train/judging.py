"""The answer judge of RL rewards: the `judge` role (an OpenAI-compatible endpoint through the teacher pool and
a durable request cache in the output folder), or the rule scorers when the train config says `judge: rules`.

A judge that is configured but cannot give a verdict stops training with one line (`JudgeUnavailable`); it is
never read as a wrong answer. VISOR's honesty check (retrieval incomplete) goes to the same judge."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from vrag_data.config import RoleConfig
from vrag_data.filters.judging import reference_for
from vrag_data.rewards.answer import INSUFFICIENT
from vrag_data.rewards.retrieval import retrieval_complete
from vrag_data.schema.records import Task, Trajectory
from vrag_data.teacher.cache import RequestCache
from vrag_data.teacher.judge import ModelJudge
from vrag_data.teacher.pool import TeacherPool

Scores = tuple[float | None, float | None]  # (judge score, honesty score); None = the rule scorer decides


class AnswerJudge:
    """`scores(trajs, task)` for one group; `close()` at the end. `method` says what judged ("model" / "rules")."""

    def __init__(self, spec: RoleConfig | str, out: Path, run_id: str, honesty: bool = False) -> None:
        self.honesty = honesty
        self.method = "rules" if spec == "rules" else "model"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._judge: ModelJudge | None = None
        if isinstance(spec, RoleConfig):
            self._loop = asyncio.new_event_loop()
            self._pool = TeacherPool({"judge": spec}, RequestCache(out), run_id)
            try:
                self._loop.run_until_complete(self._pool.check())
            except BaseException:
                self.close()
                raise
            self._judge = ModelJudge(self._pool)

    def scores(self, trajs: Sequence[Trajectory], task: Task) -> list[Scores]:
        if self._judge is None or self._loop is None:
            return [(None, None)] * len(trajs)
        async def all_of() -> list[Scores]:
            return list(await asyncio.gather(*(self._one(t, task) for t in trajs)))

        return self._loop.run_until_complete(all_of())

    async def _one(self, t: Trajectory, task: Task) -> Scores:
        assert self._judge is not None
        if not t.final_answer:
            return 0.0, 0.0
        ref = reference_for(t, task)
        fmt = None if ref == INSUFFICIENT else task.answer_format
        if self.honesty and not retrieval_complete(t.retrieved_pages, task.evidence_pages):
            h = await self._judge.honesty(task.question, t.final_answer, sample=t.sample)
            return None, h.score
        j = await self._judge.judge(task.question, ref, t.final_answer, fmt, sample=t.sample)
        return j.score, None

    def close(self) -> None:
        if self._loop is not None:
            self._loop.run_until_complete(self._pool.close())
            self._loop.close()
            self._loop = None
