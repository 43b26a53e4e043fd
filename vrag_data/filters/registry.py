"""Filter names -> classes, chains of configured filters, and run-config overrides of a recipe's chain.

A recipe holds its chain as configured filter instances (its thresholds live there). A run config may
replace the chain by names (`filters.chains.<recipe>`) and set options per filter under the recipe
(`filters.options.<recipe>.<filter>`); options are applied over the recipe's settings of that filter. An unknown
filter, an unknown option, or an option for a filter that the recipe's chain does not run fails with one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vrag_data.errors import ConfigError
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
        raise ValueError(f"unknown option(s) {bad}; known: {', '.join(sorted(fields))}")
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
    recipe's settings), each with `options[filter]` applied. ConfigError names the config key and the fix."""
    own = {f.name: f for f in filters}
    names = list(chain) if chain is not None else [f.name for f in filters]
    bad = [n for n in names if n not in own and n not in FILTERS]
    if bad:
        raise ConfigError(f"filters.chains.{recipe}: unknown filter(s) {bad}; known filters: {', '.join(sorted(FILTERS))}")
    opts = dict(options or {})
    for n in opts:
        if n not in names:  # an option that would do nothing: say which chain runs instead
            raise ConfigError(f"filters.options.{recipe}.{n}: the {recipe} chain does not run {n} (chain: "
                              f"{', '.join(names) or 'empty'}); add it to filters.chains.{recipe} or remove the option")
    out = []
    for n in names:
        try:
            out.append(_with_options(own[n] if n in own else make_filter(n), opts.get(n, {})))
        except ValueError as err:
            raise ConfigError(f"filters.options.{recipe}.{n}: {err}") from None
    return out


def default_chain(recipe: Any, config: Any | None = None) -> FilterChain:
    """The chain of `recipe` (a `Recipe` object); `config` (a `FiltersConfig`) may replace the names
    (`chains[recipe.name]`) and set options per filter (`options[recipe.name][filter]`, over the recipe's)."""
    if isinstance(recipe, str):  # names are resolved by the entry points (the registry), never here
        raise TypeError(f"default_chain takes a Recipe object, not the name {recipe!r}; resolve it with vrag_data.recipe.get_recipe")
    chain = None if config is None else config.chains.get(recipe.name)
    options = None if config is None else config.options.get(recipe.name)
    return FilterChain(configure_filters(recipe.name, recipe.filters, chain, options))
