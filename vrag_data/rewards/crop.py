"""Crop (visual perception) rewards (pure): IoU and UniDoc-RL's best-match IoU reward."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

BoxLike = Sequence[float]


def _ordered(b: BoxLike) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = (float(v) for v in b[:4])
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def box_area(b: BoxLike) -> float:
    x1, y1, x2, y2 = _ordered(b)
    return (x2 - x1) * (y2 - y1)


def iou(box_a: BoxLike, box_b: BoxLike) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes in the same coordinate space.

    Corners are re-ordered first so the result never depends on how a model wrote them; two
    zero-area boxes score 0 (there is nothing to overlap).
    """
    ax1, ay1, ax2, ay2 = _ordered(box_a)
    bx1, by1, bx2, by2 = _ordered(box_b)
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = box_area(box_a) + box_area(box_b) - inter
    return inter / union if union > 0 else 0.0


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
