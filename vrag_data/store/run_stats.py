"""A run's stats from its shards' (each shard of a flow rewrites the run manifest with its own counts)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


RATES = ("episodes_per_s", "finish_rate", "invalid_rate")  # per-shard ratios: not summed over shards


def merge_shard_stats(shards: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's stats from its shards' stats (each shard of a flow rewrites the manifest with its own): counts summed,
    count tables (`{key: count}`) summed key by key, ratios left out (they do not add up)."""
    totals: dict[str, Any] = {}
    for stats in shards:
        for k, v in stats.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in RATES:
                totals[k] = totals.get(k, 0) + v
            elif isinstance(v, dict):
                agg = totals.setdefault(k, {})
                for kk, vv in v.items():
                    agg[kk] = agg.get(kk, 0) + vv
    return totals
