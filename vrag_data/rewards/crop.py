"""Crop (visual perception) rewards (pure): IoU and UniDoc-RL's best-match IoU reward."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vrag_data.env.geometry import box_area, iou

BoxLike = Sequence[float]
__all__ = ["box_area", "crop_reward", "iou"]


def crop_reward(
    predicted: Sequence[tuple[str, BoxLike]], gold: Mapping[str, Sequence[BoxLike]], no_crop: float = 0.0
) -> float:
    """UniDoc-RL visual-perception reward: each predicted (page, box) scores its IoU with the best-matching
    gold box on the same page (0 when that page has none); the reward is the mean over predictions.

    Boxes must share a space (the pipeline uses 0-1000 normalised). Without predictions returns `no_crop`.
    """
    if not predicted:
        return no_crop
    scores = [max((iou(box, g) for g in gold.get(page, ())), default=0.0) for page, box in predicted]
    return sum(scores) / len(scores)
