"""`max_turns` has one meaning wherever it crosses a stage: the policy's free turns (`TURN_BUDGET_RULE`). The recipe's
options set it, the run manifest and the export record it, and an RL rollout uses the recipe's own budget unless the
train config sets one (it used to roll out 4 turns whatever the recipe, and the export dropped the budget)."""

from __future__ import annotations

import pytest

from tests.support.shipped import SHIPPED
from vrag_data.export.hints import recipe_hints
from vrag_data.recipe import get_recipe
from vrag_data.train.config import RlConfig


@pytest.mark.parametrize("name", SHIPPED)
def test_an_rl_rollout_defaults_to_the_recipes_own_free_turns(name):
    recipe = get_recipe(name)
    assert RlConfig().max_turns is None
    rolled = recipe.for_rl(RlConfig().max_turns, 200704)
    # free turns as in synthesis; the environment also counts the recipe's own steps (EVisRAG's retrieval)
    assert rolled.free_turns == recipe.free_turns and rolled.env.max_turns == recipe.free_turns + recipe.setup_steps
    assert recipe_hints(recipe)["max_turns"] == recipe.free_turns == recipe.describe()["max_turns"]


def test_a_budget_set_for_the_rollout_or_the_recipe_means_free_turns():
    evisrag = get_recipe("evisrag")  # one retrieval step before its single free turn
    assert (evisrag.free_turns, evisrag.setup_steps) == (2, 1)
    assert evisrag.for_rl(RlConfig(max_turns=3).max_turns, 200704).env.max_turns == 4  # 3 free + its retrieval
    configured = evisrag.configure({"max_turns": 1})
    assert configured.free_turns == 1 and recipe_hints(configured)["max_turns"] == 1
    assert configured.for_rl(None, 200704).free_turns == 1
    with pytest.raises(ValueError):
        RlConfig(max_turns=0)
