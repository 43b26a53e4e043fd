"""Recipe names -> recipes, filled by registration.

A recipe module registers its recipe with `register(RECIPE)`. Installed recipe packages announce their
modules under the `vrag_data.recipes` entry-point group (this project's own recipes, in `pipelines/`, are
announced in `pyproject.toml`); they are imported the first time a name is looked up. Only entry points
(CLI, flows, trainer) resolve names; the stages get the resolved object.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from vrag_data.config import ConfigError
from vrag_data.env.grammar import register_grammar
from vrag_data.recipe.base import Recipe

ENTRY_POINT_GROUP = "vrag_data.recipes"
_RECIPES: dict[str, Recipe] = {}
_loaded = False


def register(recipe: Recipe, *, replace: bool = False) -> Recipe:
    """Make `recipe` resolvable by its name (and its grammar by the grammar's name)."""
    old = _RECIPES.get(recipe.name)
    if old is not None and old is not recipe and not replace:
        raise ValueError(f"recipe {recipe.name!r} is already registered ({old.paper}); pass replace=True to override it")
    register_grammar(recipe.grammar)
    _RECIPES[recipe.name] = recipe
    return recipe


def unregister(name: str) -> None:
    _RECIPES.pop(name, None)


def _load_installed() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            importlib.import_module(ep.value.split(":")[0])
        except ImportError as err:
            raise ConfigError(f"recipe package {ep.value!r} (entry point {ep.name!r}) cannot be imported: {err}") from None


def recipe_names() -> list[str]:
    _load_installed()
    return sorted(_RECIPES)


def get_recipe(name: str, options: Mapping[str, Any] | None = None, max_turns: int | None = None) -> Recipe:
    """The recipe `name` configured with `options` (`synth.recipe_options.<name>`); one-line error otherwise."""
    _load_installed()
    recipe = _RECIPES.get(name)
    if recipe is None:
        known = ", ".join(sorted(_RECIPES)) or "none (is the project installed? `pip install -e .` registers its recipes)"
        raise ConfigError(f"unknown recipe {name!r}; choose one of: {known}")
    if options or max_turns is not None:
        recipe = recipe.configure(options, max_turns)
    return recipe


def resolve_recipe(recipe: "Recipe | str", cfg: Any | None = None) -> Recipe:
    """The recipe configured by a run config (`RunConfig`): its `synth.recipe_options.<name>`, `synth.max_turns`
    when set, and `filters.chains.<name>` / `filters.options`. Entry points call this once and pass the object
    down. A recipe object is configured the same way (options over its own)."""
    name = recipe if isinstance(recipe, str) else recipe.name
    base = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if cfg is None:
        return base
    unknown = sorted(set(cfg.filters.chains) - set(recipe_names()))
    if unknown:
        raise ConfigError(f"filters.chains: unknown recipe(s) {unknown}; choose from: {', '.join(recipe_names())}")
    turns = cfg.synth.max_turns if "max_turns" in cfg.synth.model_fields_set else None
    options = cfg.synth.recipe_options.get(name)
    configured = base.configure(options, turns) if options or turns is not None else base
    try:
        return configured.with_filter_options(cfg.filters.chains.get(name), cfg.filters.options)
    except ValueError as err:
        raise ConfigError(f"filters: {err}") from None


def all_recipes() -> dict[str, Recipe]:
    return {name: get_recipe(name) for name in recipe_names()}
