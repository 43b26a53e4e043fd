"""Registering a recipe is validating it: a recipe that names a reward, a filter or a role registered nowhere is
refused when it is registered, in one line naming the missing part and how to register it (it used to pass
`vrag-data recipes`, the config check, synth, filter and export, and the trainer was the first to refuse it). Roles
are resolved per recipe: a run holds the roles its recipe calls, so installing a recipe that brings a role changes
no other recipe's run id, and parsing a config does not depend on what was imported before."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.plugin_site import site_package
from tests.support.roles import ORACLE_ROLES
from tests.support.shipped import SHIPPED
from vrag_data.cli.synth import apply_policy_flags
from vrag_data.config import ConfigError, load_config, parse_config
from vrag_data.env.grammar import REACT_CROP
from vrag_data.filters import KeepPassed, Structure, register_filter, verdict
from vrag_data.filters.registry import FILTERS
from vrag_data.recipe import ExportHints, Recipe, RewardSpec, RoleSpec, base_env, get_recipe, recipe_names, register, resolve_recipe, unregister
from vrag_data.schema.roles import ROLES, register_role
from vrag_data.synth.run import default_run_id
from vrag_data.teacher.roles import roles_for

ROOT = Path(__file__).resolve().parents[2]
# Each shipped recipe's run id under its own config (configs/recipes/<recipe>.yaml), as measured before roles were
# resolved per recipe: resolving them so must not start any of these runs afresh. A deliberate change to a recipe's
# prompts, grammar, environment or options gives a new run id: update the value here with the change.
OWN_CONFIG_RUN_IDS = {
    "evisrag": "evisrag-d79bc0287e",
    "mmdoc_r1": "mmdoc_r1-95c88cd7e5",
    "unidoc_rl": "unidoc_rl-80115f84ee",
    "visor": "visor-bcbf72b21a",
    "vrag_rl": "vrag_rl-a35ce7fd55",
}


def _recipe(name: str = "audited", **kw) -> Recipe:
    base = dict(name=name, paper="a test recipe", grammar=dataclasses.replace(REACT_CROP, name=name),
                system_prompt="Answer.", user_template="Q: {question}", env=base_env(max_turns=4),
                reward=RewardSpec("vrag_rl"), export=ExportHints(max_pixels=200704), filters=(Structure(),))
    return Recipe(**{**base, **kw})


@dataclasses.dataclass
class AuditorAgreed(KeepPassed):
    name: str = "auditor_agreed"

    def score(self, item, ctx):  # pragma: no cover - never run
        return verdict(item, self.name, True)


@pytest.mark.parametrize("part, kw, line", [
    ("reward", {"reward": RewardSpec("audited_answer")},
     r"^register recipe audited: reward 'audited_answer' is not registered \(known: .*vrag_rl.*\); add it as a module in "
     r"vrag_data/rewards/kinds/ or a module announced under the entry-point group 'vrag_data.rewards', calling "
     r"`register_reward\(\.\.\.\)`$"),
    ("filter", {"filters": (Structure(), AuditorAgreed())},
     r"^register recipe audited: filter 'auditor_agreed' \(AuditorAgreed\) is not registered; add it as a module in "
     r"vrag_data/filters/ or a module announced under the entry-point group 'vrag_data.filters', calling "
     r"`register_filter\(\.\.\.\)`$"),
    ("RL filter", {"rl_filters": (AuditorAgreed(),)}, r"^register recipe audited: filter 'auditor_agreed' \(AuditorAgreed\)"),
    ("role", {"roles": (RoleSpec("policy", "acts"), RoleSpec("auditor", "re-reads the answer"))},
     r"^register recipe audited: role 'auditor' is not registered; add `register_role\(RoleSpec\('auditor', \.\.\.\)\)` "
     r"in the recipe's module, or a module announced under the entry-point group 'vrag_data.roles'"),
])
def test_a_recipe_naming_an_unregistered_part_fails_at_registration_with_one_line(part, kw, line):
    with pytest.raises(ConfigError, match=line) as err:
        register(_recipe(**kw))
    assert "\n" not in str(err.value)
    assert "audited" not in recipe_names()  # nothing half-registered: every later stage says "unknown recipe"


def test_a_filter_whose_name_another_class_holds_is_refused():
    @dataclasses.dataclass
    class Impostor(KeepPassed):
        name: str = "structure"

        def score(self, item, ctx):  # pragma: no cover - never run
            raise AssertionError

    with pytest.raises(ConfigError, match=r"^register recipe audited: filter 'structure' \(Impostor\) is not registered "
                                          r"\(the name is taken by Structure\)"):
        register(_recipe(filters=(Impostor(),)))


def test_a_recipe_referenced_by_module_path_is_validated_the_same_way(tmp_path, monkeypatch):
    (tmp_path / "my_recipe_mod.py").write_text(
        "import dataclasses\n"
        "from vrag_data.env.grammar import REACT_CROP\n"
        "from vrag_data.recipe import ExportHints, Recipe, RewardSpec, base_env\n"
        "RECIPE = Recipe(name='by_ref', paper='p', grammar=dataclasses.replace(REACT_CROP, name='by_ref'), system_prompt='',\n"
        "                user_template='{question}', env=base_env(), reward=RewardSpec('nowhere'), export=ExportHints(max_pixels=200704))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"^register recipe by_ref: reward 'nowhere' is not registered"):
        get_recipe("my_recipe_mod:RECIPE")


def test_registered_parts_register_and_the_recipe_runs_its_own_roles_only():
    auditor = register_role(RoleSpec("auditor", "re-reads the answer"))  # offline: same_as policy
    register_filter(AuditorAgreed)
    recipe = register(_recipe(filters=(AuditorAgreed(),), roles=(RoleSpec("policy", "acts"), auditor)))
    try:
        assert "audited" in recipe_names()
        # a config parsed now knows the role; a shipped recipe's run holds none of it
        cfg = parse_config({"roles": {**ORACLE_ROLES, "auditor": {"same_as": "policy"}, "student": {"kind": "extractive"}}})
        assert set(roles_for(get_recipe("vrag_rl"), cfg.roles)) == {"policy", "grounding", "judge"}
        assert set(roles_for(recipe, cfg.roles)) == {"policy", "auditor", "judge"}
        oracle = apply_policy_flags(parse_config({}), "oracle", None, None, None, recipe)
        assert oracle.roles["auditor"].same_as == "policy" and "grounding" not in oracle.roles
    finally:
        unregister(recipe.name)
        FILTERS.pop("auditor_agreed", None)
        ROLES.unregister("auditor")


def test_installing_a_recipe_with_its_own_role_changes_no_shipped_run_id():
    def ids() -> dict[str, str]:
        out = {}
        for name in SHIPPED:
            base = parse_config({"roles": {"student": {"kind": "extractive"}}})
            cfg = apply_policy_flags(base, "oracle", None, None, None, get_recipe(name))
            out[name] = default_run_id(get_recipe(name), cfg)
        return out

    before = ids()
    auditor = register_role(RoleSpec("auditor", "re-reads the answer"))
    recipe = register(_recipe(roles=(RoleSpec("policy", "acts"), auditor)))
    try:
        assert ids() == before
    finally:
        unregister(recipe.name)
        ROLES.unregister("auditor")


@pytest.mark.parametrize("name", sorted(OWN_CONFIG_RUN_IDS))
def test_each_shipped_recipe_keeps_its_run_id_under_its_own_config(name):
    cfg = load_config(ROOT / "configs" / "recipes" / f"{name}.yaml")
    assert default_run_id(resolve_recipe(name, cfg), cfg) == OWN_CONFIG_RUN_IDS[name]


def test_parsing_a_config_does_not_depend_on_import_order():
    """A fresh interpreter parses a config naming a recipe's role before anything of the recipes is imported (it used
    to refuse `grounding` until `vrag_data.recipe` had been imported)."""
    probe = ("import sys\nfrom vrag_data.config import parse_config\n"
             "cfg = parse_config({'roles': {'grounding': {'same_as': 'policy'}, 'policy': {'kind': 'oracle'}}})\n"
             "print(sorted(cfg.roles))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "['grounding', 'policy']", out.stderr[-2000:]
    with pytest.raises(ConfigError, match=r"unknown role\(s\) \['grouding'\]; known roles: \['policy', 'judge', 'student', "
                                          r"'question_writer', .*'grounding'"):
        parse_config({"roles": {"grouding": {"same_as": "policy"}}})


def test_an_installed_recipe_naming_an_unregistered_reward_stops_the_cli_with_one_line(tmp_path):
    """The package is announced and imported by discovery: `vrag-data recipes` (and every command that looks a recipe
    up) stops with one line naming the package, the recipe, the missing reward and how to register it."""
    site = site_package(tmp_path, "audit_recipe", "vrag_data.recipes", "audit = audit_recipe", '''
        import dataclasses
        from vrag_data.env.grammar import REACT_CROP
        from vrag_data.recipe import ExportHints, Recipe, RewardSpec, base_env, register

        RECIPE = register(Recipe(name="audit", paper="p", grammar=dataclasses.replace(REACT_CROP, name="audit"),
                                 system_prompt="", user_template="{question}", env=base_env(),
                                 reward=RewardSpec("audited_answer"), export=ExportHints(max_pixels=200704)))
    ''')
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    res = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "recipes"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    lines = (res.stderr + res.stdout).strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr + res.stdout
    assert lines[0].startswith("error: recipe plugin 'audit' (audit_recipe) failed to load: register recipe audit: reward "
                               "'audited_answer' is not registered"), lines
    assert "register_reward(...)" in lines[0] and "fix or uninstall the package that declares it" in lines[0]
