"""Recipe names -> recipes: the library's registry (`vrag_data.recipe.registry`), re-exported."""

from vrag_data.recipe.registry import all_recipes, get_recipe, recipe_names, register

__all__ = ["all_recipes", "get_recipe", "recipe_names", "register"]
