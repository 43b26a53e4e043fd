"""Filter names -> classes, chains of configured filters, and run-config overrides of a recipe's chains.

A recipe holds two chains as configured filter instances (its thresholds live there): `filters` decides the SFT
data, `rl_filters` the RL data (empty: RL rows come from the SFT-kept trajectories). A run config may replace a chain
by names (`filters.chains.<recipe>`, `filters.rl_chains.<recipe>`) and set options per filter under the recipe
(`filters.options.<recipe>.<filter>`, `filters.rl_options.<recipe>.<filter>`); options are applied over the recipe's
settings of that filter. An unknown filter, an unknown option, or an option for a filter that the chain does not
run fails with one line; so do SFT and RL task splits that disagree (a task would land on both sides or neither).

A filter is one class (a dataclass with `name`, `score` or `score_all`, and `keep`) and one `register_filter(Cls)`
line; its name is the class's `name` (what its verdicts say and what chains and options use), nothing else. Found by
the one discovery rule (`vrag_data.plugins`): a module of `vrag_data/filters/` holding that line (the shipped
filters), or one an installed package announces under the entry-point group `vrag_data.filters`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from vrag_data.config import FiltersConfig
from vrag_data.errors import ConfigError
from vrag_data.filters.base import AnyFilter
from vrag_data.plugins import Registry

ENTRY_POINT_GROUP = "vrag_data.filters"  # a package's filters: a module that registers them, or a filter class


def _check(cls: type, others: dict[str, type]) -> None:
    if not (hasattr(cls, "keep") and (hasattr(cls, "score") or hasattr(cls, "score_all"))):
        raise ConfigError(f"filter {cls.__module__}.{cls.__qualname__} has no keep() and score() or score_all(): see "
                          "vrag_data.filters.base.Filter")


def filter_name(cls: type) -> str:
    """A filter class's name: its `name` (the dataclass field's default), the one its verdicts carry."""
    name = getattr(cls, "name", "")
    return name if isinstance(name, str) else ""


REGISTRY: Registry[type] = Registry("filter", ENTRY_POINT_GROUP, lambda obj: isinstance(obj, type), expected="filter class",
                                    name_of=filter_name, check=_check, error=ConfigError, call="register_filter",
                                    folder="vrag_data.filters")
FILTERS: dict[str, type] = REGISTRY.items  # every filter by name, once `known_filters()` has loaded them


def register_filter(cls: type, *rest: object) -> type:
    """Make `cls` (a dataclass with a default `name`, `score` or `score_all`, and `keep`) available to
    `filters.chains.<recipe>` under its `name`; a name already taken by another class is refused in one line."""
    if isinstance(cls, str) or rest:
        raise ConfigError(f"register_filter({cls!r}, ...): a filter is registered under its own `name`; call "
                          "register_filter(FilterClass) and give the class `name: str = \"<name>\"`")
    return REGISTRY.register(cls)


def known_filters() -> dict[str, type]:
    """Every filter by name: the built-ins, then those installed packages declare in the `vrag_data.filters` entry
    point group (loaded once; one that cannot be imported stops with one line naming it)."""
    REGISTRY.load()
    return FILTERS



class ChainOwner(Protocol):
    """What a chain is read from: a recipe's name and its two chains (`vrag_data.recipe.Recipe`)."""

    name: str
    filters: tuple[Any, ...]
    rl_filters: tuple[Any, ...]


F = TypeVar("F")


def make_filter(name: str, options: Mapping[str, Any] | None = None) -> AnyFilter:
    cls = known_filters().get(name)
    if cls is None:
        raise ValueError(f"unknown filter {name!r}; known filters: {sorted(FILTERS)} (a filter is added by "
                         f"{REGISTRY.how_to_add()})")
    try:
        return cls(**dict(options or {}))
    except TypeError as err:
        raise ValueError(f"filter {name!r}: bad options {dict(options or {})}: {err}") from None


def _with_options(f: F, options: Mapping[str, Any]) -> F:
    if not options:
        return f
    fields = {x.name for x in dataclasses.fields(f)} - {"name"}
    bad = sorted(set(options) - fields)
    if bad:
        raise ValueError(f"unknown option(s) {bad}; known: {', '.join(sorted(fields))}")
    return dataclasses.replace(f, **dict(options))  # type: ignore[type-var]  # filters are dataclasses


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
                      options: Mapping[str, Mapping[str, Any]] | None, stage: str = "") -> list[Any]:
    """The recipe's filter instances, or the filters named in `chain` (a listed filter the recipe has keeps the
    recipe's settings), each with `options[filter]` applied. `stage` "rl" names the RL chain's keys
    (`filters.rl_chains`, `filters.rl_options`). ConfigError names the config key and the fix."""
    ck, ok = ("filters.rl_chains", "filters.rl_options") if stage == "rl" else ("filters.chains", "filters.options")
    own = {f.name: f for f in filters}
    names = list(chain) if chain is not None else [f.name for f in filters]
    bad = [n for n in names if n not in own and n not in known_filters()]
    if bad:
        raise ConfigError(f"{ck}.{recipe}: unknown filter(s) {bad}; known filters: {', '.join(sorted(FILTERS))}")
    opts = dict(options or {})
    for n in opts:
        if n not in names:  # an option that would do nothing: say which chain runs instead
            raise ConfigError(f"{ok}.{recipe}.{n}: the {recipe}{' RL' if stage == 'rl' else ''} chain does not run {n} (chain: "
                              f"{', '.join(names) or 'empty'}); add it to {ck}.{recipe} or remove the option")
    out = []
    for n in names:
        try:
            out.append(_with_options(own[n] if n in own else make_filter(n), opts.get(n, {})))
        except ValueError as err:
            raise ConfigError(f"{ok}.{recipe}.{n}: {err}") from None
    return out


def default_chain(recipe: ChainOwner, config: FiltersConfig | None = None) -> FilterChain:
    """The chain of `recipe` (a `Recipe` object); `config` (a `FiltersConfig`) may replace the names
    (`chains[recipe.name]`) and set options per filter (`options[recipe.name][filter]`, over the recipe's)."""
    if isinstance(recipe, str):  # names are resolved by the entry points (the registry), never here
        raise TypeError(f"default_chain takes a Recipe object, not the name {recipe!r}; resolve it with vrag_data.recipe.get_recipe")
    chain = None if config is None else config.chains.get(recipe.name)
    options = None if config is None else config.options.get(recipe.name)
    return FilterChain(configure_filters(recipe.name, recipe.filters, chain, options))


def rl_chain(recipe: ChainOwner, config: FiltersConfig | None = None) -> FilterChain:
    """The RL-data chain of `recipe`, with `filters.rl_chains` / `filters.rl_options` of `config` applied."""
    chain = None if config is None else config.rl_chains.get(recipe.name)
    options = None if config is None else config.rl_options.get(recipe.name)
    return FilterChain(configure_filters(recipe.name, recipe.rl_filters, chain, options, stage="rl"))
