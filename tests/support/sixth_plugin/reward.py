"""Its reward: three quarters for the right answer, a quarter for an answer of at most `max_chars` characters. It
imports only the standard library and vrag-data's reward code, so the export's reward bundle carries it."""

from vrag_data.rewards.format import tag_contents
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward, weighted


class CheckedAnswer(Reward):
    name = "checked_answer"
    weights = {"correct": 0.75, "brief": 0.25}
    params = {"max_chars": 12.0}
    judged = True

    def format_score(self, texts):
        return float(bool(tag_contents("\n".join(texts), "answer")))

    def score(self, ep, gold, w, p, judge_score, honesty_score):
        comps = {"correct": judge_or_rules(ep, gold, judge_score), "brief": float(len(ep.final_answer or "") <= p["max_chars"])}
        return RewardBreakdown(self.name, comps, w, weighted(comps, w))


register_reward(CheckedAnswer)
