"""Recipe names -> recipes. `get_recipe(name, options, max_turns)` applies run-config options."""

from __future__ import annotations

import importlib
from typing import Any

from pipelines.base import Recipe
from vrag_data.config import RECIPES, ConfigError

MODULES = {name: f"pipelines.{name}" for name in RECIPES}


def get_recipe(name: str, options: dict[str, Any] | None = None, max_turns: int | None = None) -> Recipe:
    """The recipe `name` configured with `options` (`synth.recipe_options.<name>`); one-line error otherwise."""
    if name not in MODULES:
        raise ConfigError(f"unknown recipe {name!r}; choose one of: {', '.join(MODULES)}")
    recipe: Recipe = importlib.import_module(MODULES[name]).RECIPE
    if options or max_turns is not None:
        recipe = recipe.configure(options, max_turns)
    return recipe


def all_recipes() -> dict[str, Recipe]:
    return {name: get_recipe(name) for name in MODULES}
