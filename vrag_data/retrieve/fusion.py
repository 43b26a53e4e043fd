"""Reciprocal rank fusion (pure): combine ranked page lists from several retrievers into one.

RRF scores each item by sum_i w_i / (k + rank_i), rank 1-based, over the lists that contain it. It needs no
score calibration between retrievers (BM25 scores and cosine similarities live on different scales), and
k = 60 (the value of Cormack et al.) keeps one retriever's first place from outweighing agreement lower down.
"""

from __future__ import annotations

from collections.abc import Sequence


def rrf(rankings: Sequence[Sequence[str]], weights: Sequence[float] | None = None, k: float = 60.0
        ) -> list[tuple[str, float]]:
    """(item, fused score), best first; ties keep the order in which items were first seen (list by list)."""
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"rrf: {len(rankings)} rankings but {len(weights)} weights; give one weight per ranking")
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
