"""VRAG-RL: 0.7 * judge + 0.1 * format + 0.2 * NDCG of the retrieved pages, 0 when the format gate fails."""

from __future__ import annotations

from collections.abc import Sequence

from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.format import balanced, tag_contents
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward, weighted
from vrag_data.rewards.retrieval import ndcg


class VragRlReward(Reward):
    name = "vrag_rl"
    weights = {"judge": 0.7, "format": 0.1, "ndcg": 0.2}
    params = {"gate_on_format": 1.0}
    judged = True

    def format_score(self, texts: Sequence[str]) -> float:
        """The pattern reward / gate: the episode holds a complete <search> and a complete <answer>."""
        joined = "\n".join(texts)
        ok = bool(tag_contents(joined, "search")) and bool(tag_contents(joined, "answer"))
        return float(ok and balanced(joined, ("search", "answer")))

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        fmt = self.format_score(ep.texts)
        comps = {"judge": judge_or_rules(ep, gold, judge_score), "format": fmt, "ndcg": ndcg(ep.retrieved, gold.pages)}
        gated = bool(p.get("gate_on_format", 1.0)) and fmt < 1.0
        return RewardBreakdown(self.name, comps, w, 0.0 if gated else weighted(comps, w), gated)


register_reward(VragRlReward)
