"""VISOR: (answer + retrieval) * (1 - I_format) - I_format, the answer gated on complete retrieval (honesty credit
otherwise)."""

from __future__ import annotations

from collections.abc import Sequence

from vrag_data.rewards.answer import is_unanswerable
from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.format import visor_format_invalid
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward
from vrag_data.rewards.retrieval import retrieval_complete, visor_retrieval_reward


class VisorReward(Reward):
    name = "visor"
    weights = {"answer": 1.0, "retrieval": 1.0, "format_penalty": 1.0}
    params = {"honesty": 0.2}  # partial credit for declining when retrieval was incomplete
    judged = True
    honesty_gate = True

    def format_score(self, texts: Sequence[str]) -> float:
        """1 - VISOR's invalid indicator (no search before the answer action)."""
        return 0.0 if visor_format_invalid(texts) else 1.0

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        complete = retrieval_complete(ep.retrieved, gold.pages)
        if complete or not ep.retrieval_known:  # unknown retrieval: the answer is judged, the gate is not applied
            answer = judge_or_rules(ep, gold, judge_score)
        elif honesty_score is not None:
            answer = float(honesty_score)
        else:
            answer = p["honesty"] if ep.final_answer and is_unanswerable(ep.final_answer) else 0.0
        invalid = float(visor_format_invalid(ep.texts))
        comps = {"answer": answer, "retrieval": visor_retrieval_reward(ep.search_results, gold.pages),
                 "format_penalty": invalid}
        total = (w["answer"] * answer + w["retrieval"] * comps["retrieval"]) * (1 - invalid)
        total -= w["format_penalty"] * invalid
        return RewardBreakdown(self.name, comps, w, total, gated=bool(invalid),
                               extras={"retrieval_complete": float(complete), "retrieval_known": float(ep.retrieval_known)})


register_reward(VisorReward)
