"""Answer judges: a model judge (`<judge>True|False</judge>`), VISOR's honesty judge, and rule-based scoring.

* `ModelJudge` asks the `judge` role whether a prediction matches the reference (VRAG-RL's reward-model
  setup: question, reference, prediction in; one tagged boolean out; extra detail beyond the reference
  is fine). Unlike the reference implementation it does not retry forever: an unparseable reply gets a
  bounded number of follow-ups asking for the bare tag, then the rule scorers decide, and the verdict
  says so. Every call goes through the teacher pool, so verdicts are cached like any request.
* Honesty (VISOR): when retrieval missed evidence pages, the answer is not compared with the reference;
  the agent earns `HONESTY_SCORE` (0.2) only for saying the information is insufficient.
* `RuleJudge`: `vrag_data.rewards.answer` scorers, for offline/oracle runs and as the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from vrag_data.config import SamplingConfig
from vrag_data.schema.records import Message
from vrag_data.teacher.pool import TeacherError, TeacherPool
from vrag_data.rewards.judge_prompts import (  # noqa: F401 - re-exported
    HONESTY_SCORE, HONESTY_SYSTEM, JUDGE_SYSTEM, NUDGE, honesty_user, judge_user, parse_judge,
)

Method = Literal["model", "rules", "honesty-model", "honesty-rules"]


@dataclass(frozen=True)
class Judgment:
    correct: bool  # for honesty: the reply admits the information is insufficient
    score: float
    method: Method
    reason: str = ""
    raw: str = ""  # the judge's last reply (model judges)
    request_ids: tuple[str, ...] = ()


class Judge(Protocol):
    label: str  # "rules", or "judge <model>" (+ " (same_as <role>)"): the source every verdict names
    async def judge(self, question: str, reference: str, prediction: str | None, answer_format: str | None = None, *, sample: int = 0) -> Judgment: ...

    async def honesty(self, question: str, prediction: str | None, *, sample: int = 0) -> Judgment: ...


class RuleJudge:
    """Rule scorers from `vrag_data.rewards.answer` (format-aware: Int/Float/Str/List/None)."""

    label = "rules"  # what verdicts name as their source: a rule verdict never reads as a judge's

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def judge_sync(self, reference: str, prediction: str | None, answer_format: str | None = None) -> Judgment:
        from vrag_data.rewards.answer import answer_correct  # the rewards stage owns the scorers

        score = float(answer_correct(prediction, reference, answer_format))
        ok = score >= self.threshold
        return Judgment(ok, 1.0 if ok else 0.0, "rules", f"rules score {score:.2f} (format {answer_format or 'inferred'})")

    def honesty_sync(self, prediction: str | None) -> Judgment:
        from vrag_data.rewards.answer import is_unanswerable

        ok = bool(prediction) and is_unanswerable(str(prediction))
        return Judgment(ok, HONESTY_SCORE if ok else 0.0, "honesty-rules", "declines to answer" if ok else "gives a definite answer")

    async def judge(self, question: str, reference: str, prediction: str | None, answer_format: str | None = None, *, sample: int = 0) -> Judgment:
        return self.judge_sync(reference, prediction, answer_format)

    async def honesty(self, question: str, prediction: str | None, *, sample: int = 0) -> Judgment:
        return self.honesty_sync(prediction)


class JudgeUnavailable(TeacherError):
    """The model judge could not give a verdict (endpoint down, or replies unreadable after the re-asks)."""


class ModelJudge:
    """The `judge` role of a teacher pool. Greedy by default (`sampling` overrides).

    When the endpoint fails or its replies stay unreadable, `judge`/`honesty` raise `JudgeUnavailable`: a missing
    verdict is never turned into "incorrect". Only an explicitly passed `fallback` (a `RuleJudge`) answers instead,
    and its judgments say so (method "rules-fallback")."""

    def __init__(self, pool: TeacherPool, role: str = "judge", *, max_attempts: int = 3, sampling: SamplingConfig | None = None,
                 fallback: RuleJudge | None = None) -> None:
        self.pool, self.role, self.max_attempts = pool, role, max(1, max_attempts)
        base = pool.roles[role].sampling if role in pool.roles else SamplingConfig()
        self.sampling = sampling or base.model_copy(update={"temperature": 0.0, "top_p": 1.0})
        self.fallback = fallback
        model = pool.models().get(role, role)
        same = pool.same_as(role) if hasattr(pool, "same_as") else None
        # a self-judging setup (`same_as: policy`) says so in every verdict it gives
        self.label = f"judge {model}" + (f" (same_as {same})" if same else "")

    async def judge(self, question: str, reference: str, prediction: str | None, answer_format: str | None = None, *, sample: int = 0) -> Judgment:
        if not prediction or not str(prediction).strip():
            return Judgment(False, 0.0, "model", "no answer to judge")
        user = judge_user(question, reference, prediction)
        verdict, raw, rids, why = await self._ask(JUDGE_SYSTEM, user, sample)
        if verdict is None:
            if self.fallback is None:
                raise JudgeUnavailable(f"role {self.role}: {why}")
            rule = self.fallback.judge_sync(reference, prediction, answer_format)
            return Judgment(rule.correct, rule.score, "rules-fallback", f"{why}; {rule.reason}", raw, rids)
        return Judgment(verdict, 1.0 if verdict else 0.0, "model", "judge: " + ("correct" if verdict else "incorrect"), raw, rids)

    async def honesty(self, question: str, prediction: str | None, *, sample: int = 0) -> Judgment:
        if not prediction or not str(prediction).strip():
            return Judgment(False, 0.0, "honesty-model", "no answer to judge")
        verdict, raw, rids, why = await self._ask(HONESTY_SYSTEM, honesty_user(question, prediction), sample)
        if verdict is None:
            if self.fallback is None:
                raise JudgeUnavailable(f"role {self.role}: {why}")
            rule = self.fallback.honesty_sync(prediction)
            return Judgment(rule.correct, rule.score, "honesty-rules-fallback", f"{why}; {rule.reason}", raw, rids)
        return Judgment(verdict, HONESTY_SCORE if verdict else 0.0, "honesty-model", "admits insufficient evidence" if verdict else "fabricates an answer", raw, rids)

    async def _ask(self, system: str, user: str, sample: int) -> tuple[bool | None, str, tuple[str, ...], str]:
        """Ask, then re-ask with a nudge (each follow-up is a distinct, cached request); bounded."""
        msgs = [Message(role="system", text=system), Message(role="user", text=user)]
        raw, rids = "", []
        for _ in range(self.max_attempts):
            try:
                res = await self.pool.chat(self.role, msgs, sample=sample, sampling=self.sampling)
            except TeacherError as err:
                return None, raw, tuple(rids), f"model judge unavailable ({err})"
            raw = res.text
            rids.append(res.request_id)
            if res.problem:  # an unusable reply (cut, filtered, undecodable) holds no verdict, whatever it says
                return None, raw, tuple(rids), f"judge reply unusable ({res.problem})"
            verdict = parse_judge(raw)
            if verdict is not None:
                return verdict, raw, tuple(rids), ""
            msgs = [*msgs, Message(role="assistant", text=raw), Message(role="user", text=NUDGE)]
        return None, raw, tuple(rids), f"judge reply unreadable after {self.max_attempts} attempts"


async def answer_reward(judge: Judge, question: str, reference: str, prediction: str | None, answer_format: str | None = None, *,
                        retrieval_complete: bool = True, sample: int = 0) -> Judgment:
    """VISOR's gated answer score: correctness (0/1) when retrieval found every evidence page, else the
    honesty check (0.2 for admitting the evidence is insufficient, 0 otherwise)."""
    if retrieval_complete:
        return await judge.judge(question, reference, prediction, answer_format, sample=sample)
    return await judge.honesty(question, prediction, sample=sample)


def make_judge(pool: TeacherPool | None, role: str = "judge") -> Judge:
    """The configured judge: a model judge when the role has an OpenAI-compatible endpoint, the rule scorers for
    `kind: rules`. A judge role of another kind (the oracle, the extractive reader) stops with one line. Stages
    that decide correctness check beforehand that the role is configured (`vrag_data.teacher.roles.check_roles`);
    without a pool or a role (question generation offline) the rule scorers answer, labelled `rules`."""
    kind = pool.kind(role) if pool is not None else "missing"
    if kind == "openai":
        assert pool is not None
        return ModelJudge(pool, role)
    if kind in ("rules", "missing"):
        return RuleJudge()
    raise TeacherError(f"roles.{role}: kind {kind!r} cannot judge answers; configure an endpoint or `kind: rules`")
