"""Per-recipe reward specs: each component computed separately, then combined with configurable weights.

| recipe    | total                                                                        |
|-----------|------------------------------------------------------------------------------|
| vrag_rl   | 0.7*judge + 0.1*format + 0.2*ndcg when the format passes, else 0              |
| unidoc_rl | 0.6*judge + 0.1*ndcg(interleaved) + 0.1*select + 0.1*crop + 0.1*format        |
| visor     | (answer + retrieval) * (1 - I_format) - I_format; answer gated on completeness |
| evisrag   | mean of perception, derivation, format (RS-GRPO scope rewards in `extras`)    |
| mmdoc_r1  | read-page recall + correctness                                               |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vrag_data.rewards.answer import INSUFFICIENT, answer_correct, is_unanswerable, normalize_answer, token_f1
from vrag_data.rewards.crop import crop_reward
from vrag_data.rewards.episode import Episode, Gold, episode_from_trajectory, gold_from_task
from vrag_data.rewards.format import recipe_format, visor_format_invalid
from vrag_data.rewards.retrieval import (
    interleaved_ndcg,
    ndcg,
    read_page_recall,
    retrieval_complete,
    selection_reward,
    visor_retrieval_reward,
)

if TYPE_CHECKING:  # the records are pydantic: the reward entry points import none of it
    from vrag_data.schema.records import Task, Trajectory

DEFAULT_WEIGHTS: dict[str, dict[str, float]] = {
    "vrag_rl": {"judge": 0.7, "format": 0.1, "ndcg": 0.2},
    "unidoc_rl": {"judge": 0.6, "ndcg": 0.1, "select": 0.1, "crop": 0.1, "format": 0.1},
    "visor": {"answer": 1.0, "retrieval": 1.0, "format_penalty": 1.0},
    "evisrag": {"perception": 1 / 3, "derivation": 1 / 3, "format": 1 / 3},
    "mmdoc_r1": {"recall": 1.0, "correctness": 1.0},
}
# Rewards whose answer term is a judge's verdict (a model judge in the papers), and those with VISOR's honesty gate.
JUDGED_REWARDS = frozenset({"vrag_rl", "unidoc_rl", "visor", "mmdoc_r1"})
HONESTY_REWARDS = frozenset({"visor"})
# Recipe knobs that are not weights. k_pos: EVisRAG's up-weighting of relevant images in the perception
# reward (the paper leaves its value open; 2.0 is our default). honesty: VISOR's partial credit.
DEFAULT_PARAMS: dict[str, dict[str, float]] = {
    "evisrag": {"k_pos": 2.0},
    "visor": {"honesty": 0.2},
    "vrag_rl": {"gate_on_format": 1.0},
}
NO_INFO = "no relevant information"


@dataclass
class RewardBreakdown:
    recipe: str
    components: dict[str, float]
    weights: dict[str, float]
    total: float
    gated: bool = False  # True when a gate (format / retrieval) overrode the weighted sum
    extras: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Flat scalars with "score" first, the shape verl's reward manager accepts."""
        return {"score": self.total, **self.components, **self.extras, "gated": float(self.gated)}


def resolve_weights(recipe: str, weights: Mapping[str, float] | None = None) -> dict[str, float]:
    if recipe not in DEFAULT_WEIGHTS:
        raise ValueError(f"unknown recipe {recipe!r}; known: {sorted(DEFAULT_WEIGHTS)}")
    out = dict(DEFAULT_WEIGHTS[recipe])
    for k, v in (weights or {}).items():
        if k not in out:
            raise ValueError(f"{recipe}: unknown reward weight {k!r}; known: {sorted(out)}")
        out[k] = float(v)
    return out


def _weighted(recipe: str, comps: dict[str, float], w: dict[str, float]) -> float:
    return sum(w[k] * comps[k] for k in w)


def _judge(ep: Episode, gold: Gold, judge_score: float | None) -> float:
    if judge_score is not None:
        return float(judge_score)
    return answer_correct(ep.final_answer, gold.answer, gold.answer_format)


def perception_reward(ep: Episode, gold: Gold, k_pos: float = 2.0) -> float:
    """EVisRAG: sum_i r_i / sum_i (y_i*k_pos + (1-y_i)); relevant image: r_i = k_pos * F1(pred_i, gold_i),
    irrelevant image: r_i = 1 iff the model wrote "no relevant information"."""
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


def score_episode(
    ep: Episode,
    gold: Gold,
    recipe: str,
    judge_score: float | None = None,
    weights: Mapping[str, float] | None = None,
    params: Mapping[str, float] | None = None,
    honesty_score: float | None = None,
) -> RewardBreakdown:
    """All reward components of `recipe` for one episode. `judge_score` is the model judge's verdict in
    [0, 1]; without it the rule scorer (`answer_correct`) stands in. `honesty_score` is VISOR's honesty
    judge in {0, 0.2} when retrieval is incomplete; without it a declining answer earns the credit."""
    w = resolve_weights(recipe, weights)
    p = {**DEFAULT_PARAMS.get(recipe, {}), **(params or {})}
    fmt = recipe_format(recipe, ep.texts)
    if recipe == "vrag_rl":
        comps = {"judge": _judge(ep, gold, judge_score), "format": fmt, "ndcg": ndcg(ep.retrieved, gold.pages)}
        gated = bool(p.get("gate_on_format", 1.0)) and fmt < 1.0
        return RewardBreakdown(recipe, comps, w, 0.0 if gated else _weighted(recipe, comps, w), gated)
    if recipe == "unidoc_rl":
        comps = {
            "judge": _judge(ep, gold, judge_score),
            "ndcg": interleaved_ndcg(ep.search_results, gold.pages),
            "select": selection_reward(ep.selections, gold.pages),
            "crop": crop_reward(ep.crops, gold.boxes),
            "format": fmt,
        }
        return RewardBreakdown(recipe, comps, w, _weighted(recipe, comps, w))
    if recipe == "visor":
        complete = retrieval_complete(ep.retrieved, gold.pages)
        if complete or not ep.retrieval_known:  # unknown retrieval: the answer is judged, the gate is not applied
            answer = _judge(ep, gold, judge_score)
        elif honesty_score is not None:
            answer = float(honesty_score)
        else:
            answer = p["honesty"] if ep.final_answer and is_unanswerable(ep.final_answer) else 0.0
        invalid = float(visor_format_invalid(ep.texts))
        comps = {"answer": answer, "retrieval": visor_retrieval_reward(ep.search_results, gold.pages),
                 "format_penalty": invalid}
        total = (w["answer"] * answer + w["retrieval"] * comps["retrieval"]) * (1 - invalid)
        total -= w["format_penalty"] * invalid
        return RewardBreakdown(recipe, comps, w, total, gated=bool(invalid),
                               extras={"retrieval_complete": float(complete), "retrieval_known": float(ep.retrieval_known)})
    if recipe == "evisrag":
        sufficient = gold.sufficient
        if sufficient is None:
            sufficient = retrieval_complete(ep.shown_pages, gold.pages)
        target = gold.answer if sufficient else INSUFFICIENT
        comps = {
            "perception": perception_reward(ep, gold, p["k_pos"]),
            "derivation": token_f1(ep.final_answer or "", target),
            "format": fmt,
        }
        extras = {
            # RS-GRPO: observe/evidence tokens get the mean of perception and format, think/answer tokens the
            # mean of derivation and format.
            "scope_perception": (comps["perception"] + fmt) / 2,
            "scope_derivation": (comps["derivation"] + fmt) / 2,
            "sufficient": float(sufficient),
        }
        return RewardBreakdown(recipe, comps, w, _weighted(recipe, comps, w), extras=extras)
    if recipe == "mmdoc_r1":
        # recall over the pages the agent READ (the read tool); pages a search only listed earn nothing
        comps = {"recall": read_page_recall(ep.read_pages, gold.pages), "correctness": _judge(ep, gold, judge_score)}
        return RewardBreakdown(recipe, comps, w, _weighted(recipe, comps, w))
    raise ValueError(f"unknown recipe {recipe!r}")


def score_trajectory(
    traj: Trajectory,
    task: Task,
    recipe: str | None = None,
    judge_score: float | None = None,
    weights: Mapping[str, float] | None = None,
    params: Mapping[str, float] | None = None,
    honesty_score: float | None = None,
) -> RewardBreakdown:
    """Reward breakdown of a synthesized trajectory (recipe defaults to the trajectory's own)."""
    return score_episode(
        episode_from_trajectory(traj),
        gold_from_task(task, traj),
        recipe or traj.recipe,
        judge_score=judge_score,
        weights=weights,
        params=params,
        honesty_score=honesty_score,
    )
