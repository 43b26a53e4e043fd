"""EVisRAG: the mean of perception, derivation and format; RS-GRPO's scope rewards in `extras`."""

from __future__ import annotations

from collections.abc import Sequence

from vrag_data.env.grammar import OBSERVE_EVIDENCE_ANSWER
from vrag_data.env.parse import action_kind
from vrag_data.rewards.answer import INSUFFICIENT, normalize_answer, token_f1
from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.registry import Reward, RewardBreakdown, register_reward, weighted
from vrag_data.rewards.retrieval import retrieval_complete

NO_INFO = "no relevant information"


def evisrag_format(text: str) -> float:
    """<observe>, <evidence>, <think>, <answer> each exactly once, in this order, with numbered evidence lines (the
    evisrag action grammar)."""
    return float(bool(text.strip()) and action_kind(text, OBSERVE_EVIDENCE_ANSWER) != "invalid")


def perception_reward(ep: Episode, gold: Gold, k_pos: float = 2.0) -> float:
    """sum_i r_i / sum_i (y_i*k_pos + (1-y_i)); relevant image: r_i = k_pos * F1(pred_i, gold_i), irrelevant image:
    r_i = 1 iff the model wrote "no relevant information"."""
    n = len(ep.shown_pages) or (max(gold.evidence) if gold.evidence else 0)
    if n == 0:
        return 0.0
    gold_pages = set(gold.pages)
    num = den = 0.0
    for i in range(1, n + 1):
        if gold.evidence is not None:
            g = gold.evidence.get(i, NO_INFO)
            relevant = normalize_answer(g) != normalize_answer(NO_INFO)
        else:
            page = ep.shown_pages[i - 1] if i <= len(ep.shown_pages) else ""
            relevant = page in gold_pages
            g = gold.answer
        pred = ep.evidence.get(i, "")
        if relevant:
            num += k_pos * token_f1(pred, g)
            den += k_pos
        else:
            num += float(normalize_answer(pred) == normalize_answer(NO_INFO))
            den += 1.0
    return num / den


class EvisragReward(Reward):
    name = "evisrag"
    weights = {"perception": 1 / 3, "derivation": 1 / 3, "format": 1 / 3}
    # up-weighting of relevant images in the perception reward (the paper leaves its value open; 2.0 is our default)
    params = {"k_pos": 2.0}

    def format_score(self, texts: Sequence[str]) -> float:
        return evisrag_format(texts[-1] if texts else "")

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        sufficient = gold.sufficient
        if sufficient is None:  # no label: the images suffice when every gold page is among them (no gold page: never)
            sufficient = bool(gold.pages) and retrieval_complete(ep.shown_pages, gold.pages)
        target = gold.answer if sufficient else INSUFFICIENT
        fmt = self.format_score(ep.texts)
        comps = {"perception": perception_reward(ep, gold, p["k_pos"]),
                 "derivation": token_f1(ep.final_answer or "", target), "format": fmt}
        extras = {
            # RS-GRPO: observe/evidence tokens get the mean of perception and format, think/answer tokens the mean
            # of derivation and format.
            "scope_perception": (comps["perception"] + fmt) / 2,
            "scope_derivation": (comps["derivation"] + fmt) / 2,
            "sufficient": float(sufficient),
        }
        return RewardBreakdown(self.name, comps, w, weighted(comps, w), extras=extras)


register_reward(EvisragReward)
