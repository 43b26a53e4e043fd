"""A recipe class binds the options model its hooks read: a recipe built on it without one gets that model (no
AttributeError in the middle of a run), and one built with an unrelated model is refused when it is built."""

from __future__ import annotations

import dataclasses

import pytest

from vrag_data.errors import ConfigError
from vrag_data.recipe.base import RecipeOptions


def test_a_recipe_built_on_vrag_rl_without_its_options_model_gets_it():
    from pipelines.vrag_rl import RECIPE, VragRlOptions

    sixth = dataclasses.replace(RECIPE, name="sixth_vrag", options_model=RecipeOptions, options=RecipeOptions())
    assert sixth.options_model is VragRlOptions
    assert sixth.options.grounding_fallback is False  # the hook's knob, with its default
    configured = sixth.configure({"grounding_fallback": True})
    assert configured.options.grounding_fallback is True


def test_a_recipe_built_with_another_recipes_options_is_refused_in_one_line():
    from pipelines.visor import VisorOptions
    from pipelines.vrag_rl import RECIPE

    with pytest.raises(ConfigError) as err:
        dataclasses.replace(RECIPE, name="sixth_vrag", options_model=VisorOptions, options=VisorOptions())
    msg = str(err.value)
    assert msg == ("recipe sixth_vrag: VragRlRecipe reads VragRlOptions options but was built with "
                   "options_model=VisorOptions; pass options_model=VragRlOptions or a subclass of it")


def test_a_subclass_of_the_bound_model_is_accepted():
    from pipelines.vrag_rl import RECIPE, VragRlOptions

    class MoreOptions(VragRlOptions):
        extra_knob: int = 3

    sixth = dataclasses.replace(RECIPE, name="sixth_vrag", options_model=MoreOptions, options=MoreOptions())
    assert sixth.options.extra_knob == 3 and sixth.options.grounding_fallback is False
