"""Filter names -> classes, and each recipe's default chain (overridable by `FiltersConfig.chains`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vrag_data.filters.base import FilterChain
from vrag_data.filters.difficulty import Difficulty
from vrag_data.filters.quality import Correctness, RetrievalCompleteness, Structure
from vrag_data.filters.setlevel import Balance, Dedup

FILTERS: dict[str, type] = {
    "correctness": Correctness,
    "retrieval_completeness": RetrievalCompleteness,
    "structure": Structure,
    "difficulty": Difficulty,
    "balance": Balance,
    "dedup": Dedup,
}

# Per-recipe defaults: names plus the options that make a generic filter follow the paper.
DEFAULT_CHAINS: dict[str, list[str]] = {
    # VRAG-RL: correct teacher trajectories, well-formed, balanced by steps (2-6) and action types.
    "vrag_rl": ["structure", "correctness", "balance", "dedup"],
    # UniDoc-RL A.3: quality (correct), then difficulty-aware (student wrong).
    "unidoc_rl": ["structure", "correctness", "difficulty", "dedup"],
    # VISOR: crop right after a retrieval, no full-page crop, <= 10 retrievals, completeness, correctness.
    "visor": ["structure", "retrieval_completeness", "correctness", "dedup"],
    # EVisRAG: keep correct trajectories; drop what the student always answers.
    "evisrag": ["correctness", "difficulty", "dedup"],
    "mmdoc_r1": ["structure", "correctness", "dedup"],
}
DEFAULT_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "unidoc_rl": {"difficulty": {"rule": "unidoc_sft"}},
    "visor": {"structure": {"adjacent": True, "max_retrievals": 10, "max_crop_area": 0.9}},
    "evisrag": {"difficulty": {"rule": "evisrag"}},
}


def make_filter(name: str, options: Mapping[str, Any] | None = None) -> Any:
    cls = FILTERS.get(name)
    if cls is None:
        raise ValueError(f"unknown filter {name!r}; known filters: {sorted(FILTERS)}")
    try:
        return cls(**dict(options or {}))
    except TypeError as err:
        raise ValueError(f"filter {name!r}: bad options {dict(options or {})}: {err}") from None


def default_chain(recipe: str, config: Any | None = None) -> FilterChain:
    """The recipe's chain; `config` (a `FiltersConfig`) may replace the names (`chains[recipe]`) and
    add or override options per filter (`options[name]`, applied over the recipe's defaults)."""
    if recipe not in DEFAULT_CHAINS:
        raise ValueError(f"unknown recipe {recipe!r}; known: {sorted(DEFAULT_CHAINS)}")
    names = list(DEFAULT_CHAINS[recipe])
    options = {k: dict(v) for k, v in DEFAULT_OPTIONS.get(recipe, {}).items()}
    if config is not None:
        names = list(config.chains.get(recipe, names))
        for k, v in config.options.items():
            options.setdefault(k, {}).update(v)
    return FilterChain.from_names(names, options)
