"""MM-Doc-R1: recall over the pages the agent read + correctness of the answer."""

from __future__ import annotations

from collections.abc import Sequence

from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.format import tag_contents
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward, weighted
from vrag_data.rewards.retrieval import read_page_recall


class MmdocR1Reward(Reward):
    name = "mmdoc_r1"
    weights = {"recall": 1.0, "correctness": 1.0}
    judged = True

    def format_score(self, texts: Sequence[str]) -> float:
        return float(bool(tag_contents("\n".join(texts), "answer")))

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        # recall over the pages the agent READ (the read tool); pages a search only listed earn nothing
        comps = {"recall": read_page_recall(ep.read_pages, gold.pages),
                 "correctness": judge_or_rules(ep, gold, judge_score)}
        return RewardBreakdown(self.name, comps, w, weighted(comps, w))


register_reward(MmdocR1Reward)
