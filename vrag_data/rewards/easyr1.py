"""EasyR1 entry point (`worker.reward.reward_function=<this file>:compute_score`).

EasyR1's batch reward functions take a list of dicts with at least `response` and `ground_truth` and
return one dict of floats per input with an `overall` key. For EVisRAG the ground truth is the exporter's tagged
target (`<evidence>[1]: ...</evidence><answer>...</answer>`), so the number of images and the per-image
gold evidence come from it; a sample may carry `shown_pages` / `gold_pages` / `sufficient` too. Whether the images
suffice is the sample's `sufficient`, else the tagged target's answer ("insufficient to answer" exactly when they do
not: the exporter's label); a sample with neither is refused (`MissingRewardKey`), never read as sufficient. For other recipes
it is JSON (`data_source`, `ground_truth`, `extra_info`), scored with the reward `extra_info.reward` names; a row whose
`extra_info` lacks a key that reward reads is refused (`vrag_data.rewards.verl.MissingRewardKey`).
"""

from __future__ import annotations

import json
from typing import Any

from vrag_data.rewards.format import last_tag
from vrag_data.rewards.verl import MissingRewardKey, score_row

REWARD_NAME = "vrag_data_evisrag"
REWARD_TYPE = "batch"


def compute_score(reward_inputs: list[dict[str, Any]], **kwargs: Any) -> list[dict[str, float]]:
    out = []
    for item in reward_inputs:
        gt = str(item.get("ground_truth", ""))
        row = _json_row(gt)
        if row is not None:  # another recipe's row: its own reward, with what the exporter wrote for it
            scores = score_row(str(row.get("data_source") or ""), item.get("response", ""), str(row.get("ground_truth", "")),
                               dict(row.get("extra_info") or {}), "easyr1", **kwargs)
        else:
            extra = {k: item[k] for k in ("shown_pages", "gold_pages", "sufficient", "answer_format") if k in item}
            extra["recipe"] = "evisrag"
            if extra.get("sufficient") is None and last_tag(gt, "answer") is None:
                raise MissingRewardKey(
                    f"easyr1 row {item.get('task_id') or item.get('id') or '?'}: lacks 'sufficient' and its ground truth "
                    "is not the tagged target (<evidence>...</evidence><answer>...</answer>), so whether its images hold "
                    "the evidence is unknown (written by `vrag-data export --format easyr1`; re-export the run)")
            scores = score_row("evisrag", item.get("response", ""), gt, extra, "easyr1", **kwargs)
        out.append({"overall": float(scores.pop("score")), **{k: float(v) for k, v in scores.items()}})
    return out


def _json_row(ground_truth: str) -> dict[str, Any] | None:
    if not ground_truth.lstrip().startswith("{"):
        return None
    try:
        row = json.loads(ground_truth)
    except ValueError:
        return None
    return row if isinstance(row, dict) and "extra_info" in row else None
