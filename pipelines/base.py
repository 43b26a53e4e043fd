"""The recipe type lives in the library (`vrag_data.recipe`); this module re-exports it for recipe modules."""

from vrag_data.recipe.base import Recipe, RecipeOptions, append_only, base_env
from vrag_data.schema.roles import register_role
from vrag_data.recipe.spec import ExportHints, ExtraKey, OracleSpec, RewardSpec, RoleSpec, SampleGate, SftHints

__all__ = ["ExportHints", "ExtraKey", "OracleSpec", "Recipe", "RecipeOptions", "RewardSpec", "RoleSpec", "SampleGate", "SftHints", "append_only",
           "base_env", "register_role"]
