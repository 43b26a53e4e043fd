"""EasyR1 entry point for EVisRAG (`worker.reward.reward_function=<this file>:compute_score`).

EasyR1's batch reward functions take a list of dicts with at least `response` and `ground_truth` and
return one dict of floats per input with an `overall` key. The ground truth is the exporter's tagged
target (`<evidence>[1]: ...</evidence><answer>...</answer>`), so the number of images and the per-image
gold evidence come from it; a sample may carry `shown_pages` / `gold_pages` / `sufficient` too.
"""

from __future__ import annotations

from typing import Any

from vrag_data.rewards.verl import compute_score as _verl_score

REWARD_NAME = "vrag_data_evisrag"
REWARD_TYPE = "batch"


def compute_score(reward_inputs: list[dict[str, Any]], **kwargs: Any) -> list[dict[str, float]]:
    out = []
    for item in reward_inputs:
        extra = {k: item[k] for k in ("shown_pages", "gold_pages", "sufficient", "answer_format") if k in item}
        extra["recipe"] = "evisrag"
        scores = _verl_score("evisrag", item.get("response", ""), str(item.get("ground_truth", "")), extra, **kwargs)
        out.append({"overall": float(scores.pop("score")), **{k: float(v) for k, v in scores.items()}})
    return out
