"""Recipes: one typed object per paper's pipeline (`Recipe`), and the registry that resolves names."""

from vrag_data.recipe.base import TURN_BUDGET_RULE, Recipe, RecipeOptions, append_only, base_env
from vrag_data.recipe.registry import (
    all_recipes, check_recipe_keys, get_recipe, recipe_names, register, resolve_recipe, unregister,
)
from vrag_data.recipe.spec import ExportHints, ExtraKey, OracleSpec, RewardSpec, RoleSpec, SampleGate, SftHints

__all__ = [
    "TURN_BUDGET_RULE", "ExportHints", "ExtraKey", "OracleSpec", "Recipe", "RecipeOptions", "RewardSpec", "RoleSpec", "SampleGate", "SftHints",
    "all_recipes", "append_only", "base_env", "check_recipe_keys", "get_recipe", "recipe_names", "register", "resolve_recipe", "unregister",
]
