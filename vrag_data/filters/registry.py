"""Filter names -> classes, chains of configured filters, and run-config overrides of a recipe's chain.

A recipe holds its chain as configured filter instances (its thresholds live there). A run config may
replace the chain by names (`filters.chains.<recipe>`) and set options per filter (`filters.options.<filter>`);
options are applied over the recipe's settings of that filter, and an unknown filter or option fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def make_filter(name: str, options: Mapping[str, Any] | None = None) -> Any:
    cls = FILTERS.get(name)
    if cls is None:
        raise ValueError(f"unknown filter {name!r}; known filters: {sorted(FILTERS)}")
    try:
        return cls(**dict(options or {}))
    except TypeError as err:
        raise ValueError(f"filter {name!r}: bad options {dict(options or {})}: {err}") from None


def _with_options(f: Any, options: Mapping[str, Any]) -> Any:
    if not options:
        return f
    fields = {x.name for x in dataclasses.fields(f)} - {"name"}
    bad = sorted(set(options) - fields)
    if bad:
        raise ValueError(f"filter {f.name!r}: unknown option(s) {bad}; known: {sorted(fields)}")
    return dataclasses.replace(f, **dict(options))


@dataclass
class FilterChain:
    filters: list[Any]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters]

    @classmethod
    def from_names(cls, names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None) -> "FilterChain":
        """Build filters by registry name; `options[name]` holds each filter's keyword arguments."""
        return cls([make_filter(n, (options or {}).get(n, {})) for n in names])


def configure_filters(recipe: str, filters: Sequence[Any], chain: Sequence[str] | None,
                      options: Mapping[str, Mapping[str, Any]] | None) -> list[Any]:
    """The recipe's filter instances, or the filters named in `chain` (a listed filter the recipe has keeps the
    recipe's settings), each with `options[filter]` applied. ValueError names the filter and the option."""
    own = {f.name: f for f in filters}
    names = list(chain) if chain is not None else [f.name for f in filters]
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(FILTERS) - set(names))
    if unknown:
        raise ValueError(f"filters.options: unknown filter(s) {unknown}; known filters: {sorted(FILTERS)}")
    for n in set(opts) - set(names):  # options of a filter this chain does not run: still checked for typos
        _with_options(make_filter(n), opts[n])
    return [_with_options(own[n] if n in own else make_filter(n), opts.get(n, {})) for n in names]


def default_chain(recipe: Any, config: Any | None = None) -> FilterChain:
    """The recipe's chain (a `Recipe`, or a registered name); `config` (a `FiltersConfig`) may replace the
    names (`chains[recipe]`) and set options per filter (`options[name]`, applied over the recipe's)."""
    if isinstance(recipe, str):
        from vrag_data.recipe.registry import get_recipe

        recipe = get_recipe(recipe)
    chain = None if config is None else config.chains.get(recipe.name)
    options = {} if config is None else config.options
    return FilterChain(configure_filters(recipe.name, recipe.filters, chain, options))
