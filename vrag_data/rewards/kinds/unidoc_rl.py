"""UniDoc-RL: 0.6 * judge + 0.1 * interleaved NDCG + 0.1 * selection + 0.1 * crop IoU + 0.1 * format."""

from __future__ import annotations

from collections.abc import Sequence

from vrag_data.env.grammar import REACT_SELECT_CROP
from vrag_data.env.parse import action_kind
from vrag_data.rewards.crop import crop_reward
from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward, weighted
from vrag_data.rewards.retrieval import interleaved_ndcg, selection_reward


class UnidocRlReward(Reward):
    name = "unidoc_rl"
    weights = {"judge": 0.6, "ndcg": 0.1, "select": 0.1, "crop": 0.1, "format": 0.1}
    judged = True

    def format_score(self, texts: Sequence[str]) -> float:
        """Every assistant turn parses under the unidoc_rl action grammar (exactly one of <search>, <select>, <bbox>,
        <answer>; balanced, non-empty, un-nested tags) and the episode ends with an answer."""
        if not texts:
            return 0.0
        kinds = [action_kind(t, REACT_SELECT_CROP) for t in texts]
        return float(all(k != "invalid" for k in kinds) and kinds[-1] == "answer")

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        comps = {
            "judge": judge_or_rules(ep, gold, judge_score),
            "ndcg": interleaved_ndcg(ep.search_results, gold.pages),
            "select": selection_reward(ep.selections, gold.pages),
            "crop": crop_reward(ep.crops, gold.boxes),
            "format": self.format_score(ep.texts),
        }
        return RewardBreakdown(self.name, comps, w, weighted(comps, w))


register_reward(UnidocRlReward)
