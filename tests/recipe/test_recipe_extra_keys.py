"""A recipe declares the keys its hooks write into an episode's `extra`, typed (`Recipe.extra_keys`): what a filter or
the exporter reads back has one declaration instead of a string both sides spell (a recipe once handed the exporter
its data through bare string keys and imported the exporter's constant to name one). An episode whose declared key
holds another type ends in error with one line naming the key, and is never exported as it is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.roles import ORACLE_ROLES
from tests.support.shipped import SHIPPED
from tests.support.synth_workspace import sample_workspace
from vrag_data.config import ConfigError, RunConfig
from vrag_data.env.grammar import REACT_CROP
from vrag_data.recipe import ExportHints, ExtraKey, Recipe, RewardSpec, get_recipe, register, resolve_recipe, unregister
from vrag_data.recipe.base import base_env
from vrag_data.schema.extra_keys import LIBRARY_KEYS, ROLE_PROMPTS, SUFFICIENT
from vrag_data.store.run import RunDir
from vrag_data.synth.run import synth

CHECKS = ExtraKey("checks", dict, "what the checker said", note=True)


class Noting(Recipe):
    """Writes `value` under the key `checks` when the episode ends."""

    value: object = None

    async def finish(self, ep) -> None:
        ep.note("checks", type(self).value)


def _recipe(cls: type[Recipe] = Recipe, **kw) -> Recipe:
    return cls(**{**dict(name="noting", paper="a test recipe", grammar=dataclasses.replace(REACT_CROP, name="noting"),
                         system_prompt="Answer.", user_template="Q: {question}",
                         env=base_env(coord_space="qwen2.5-vl", page_max_pixels=200704, top_k=1, max_turns=6),
                         reward=RewardSpec("vrag_rl"), export=ExportHints(max_pixels=200704)), **kw})


def test_a_declared_key_reads_back_typed_or_says_which_key_in_one_line():
    assert CHECKS.read({"checks": [{"agrees": True}]}) == [{"agrees": True}] and CHECKS.read({}) is None
    with pytest.raises(ValueError, match=r"^an entry of extra\['checks'\] is a str, declared dict \(what the checker said\)$"):
        CHECKS.read({"checks": [{"agrees": True}, "yes"]})
    with pytest.raises(ValueError, match=r"^extra\['sufficient'\] is a str, declared bool"):
        SUFFICIENT.read({"sufficient": "yes"})


@pytest.mark.parametrize("keys, line", [
    ((CHECKS, CHECKS), r"^register recipe noting: extra key 'checks' is declared twice$"),
    ((ExtraKey("sufficient", str, "mine"),),
     r"^register recipe noting: extra key 'sufficient' is the library's \(.*\); declare it as "
     r"vrag_data.schema.extra_keys.SUFFICIENT$"),
])
def test_a_declaration_that_clashes_fails_at_registration_with_one_line(keys, line):
    with pytest.raises(ConfigError, match=line):
        register(_recipe(extra_keys=keys))


def test_the_shipped_recipes_declare_the_library_keys_they_write_as_the_library_does():
    # EVisRAG's label and shown pages, MM-Doc-R1's answer-agent prompt: one declaration shared with the exporter
    declared = {get_recipe(name).name: {k.name: k for k in get_recipe(name).extra_keys} for name in SHIPPED}
    assert declared["evisrag"]["sufficient"] is SUFFICIENT and declared["mmdoc_r1"]["role_prompts"] is ROLE_PROMPTS
    for keys in declared.values():
        assert all(LIBRARY_KEYS.get(n, k) is k for n, k in keys.items())


@pytest.mark.slow
@pytest.mark.parametrize("value, status", [({"agrees": True}, "answered"), ("agrees", "error")])
def test_an_episode_writing_another_type_under_a_declared_key_ends_in_error(value, status, tmp_path_factory):
    ws: Path = sample_workspace(tmp_path_factory.getbasetemp())
    cls = type("Noting", (Noting,), {"value": value})
    recipe = register(_recipe(cls, extra_keys=(CHECKS,)), replace=True)
    try:
        cfg = RunConfig.model_validate({"roles": ORACLE_ROLES})
        res = synth(str(ws), cfg, resolve_recipe(recipe, cfg), run_id=f"noting-{status}", limit=2, progress=False)
        trajs = list(RunDir(str(ws / "runs" / res.run_id)).episodes())
        assert trajs and {t.status for t in trajs} == {status}
        if status == "error":
            assert all(t.reason == "recipe noting: an entry of extra['checks'] is a str, declared dict (what the "
                                   "checker said)" for t in trajs)
    finally:
        unregister(recipe.name)
