"""Typed per-recipe options, as a user meets them: a misspelled recipe key, another recipe's option, a filter option
for a filter the recipe does not run, or the removed global turn budget stops `vrag-data run` and `vrag-data synth`
with one line naming the key (exit 2) before a workspace folder exists; each recipe keeps its own turn budget
unless the config sets one for it by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.roles import ORACLE_ROLES
from vrag_data.cli.main import app
from vrag_data.config import load_config
from vrag_data.config_check import check_run_config
from vrag_data.recipe import recipe_names, resolve_recipe

REPO = Path(__file__).resolve().parents[2]


def _cfg(tmp_path: Path, extra: dict) -> Path:
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    cfg = {"workspace": str(tmp_path / "ws"), "ingest": {"paths": [str(docs)]}, "tasks": {"file": str(qa)},
           "synth": {"recipes": ["visor"]}, "roles": ORACLE_ROLES}
    for section, values in extra.items():
        cfg.setdefault(section, {}).update(values)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


CASES = {
    "misspelled recipe in synth.recipe_options": (
        {"synth": {"recipe_options": {"visr": {"window": 3}}}},
        ["synth.recipe_options.visr: not a registered recipe; registered recipes: {registered}"]),
    "misspelled recipe in filters.chains": (
        {"filters": {"chains": {"visr": ["correctness"]}}}, ["filters.chains.visr: not a registered recipe"]),
    "misspelled recipe in filters.options": (
        {"filters": {"options": {"visr": {"structure": {"max_retrievals": 4}}}}}, ["filters.options.visr: not a registered recipe"]),
    "misspelled recipe in export.max_pixels": (
        {"export": {"max_pixels": {"visr": 401408}}}, ["export.max_pixels.visr: not a registered recipe"]),
    "another recipe's option": (
        {"synth": {"recipe_options": {"visor": {"grounding": False}}}},
        ["synth.recipe_options.visor: grounding: Extra inputs are not permitted (known: top_k, coord_space, max_pixels, "
         "max_turns, max_invalid, scope, window)"]),
    "filter option for a filter the recipe lacks": (
        {"filters": {"options": {"visor": {"balance": {"max_per_bucket": 3}}}}},
        ["filters.options.visor.balance: the visor chain does not run balance (chain: structure, retrieval_completeness, "
         "correctness, dedup)"]),
    "misspelled filter option": (
        {"filters": {"options": {"visor": {"structure": {"max_retrieval": 4}}}}},
        ["filters.options.visor.structure: unknown option(s) ['max_retrieval']"]),
    "filter option in the old global shape": (
        {"filters": {"options": {"structure": {"max_retrievals": 4}}}},
        ["filters.options.<recipe>.structure.<option>"]),
    "the old global synth.max_turns": (
        {"synth": {"max_turns": 8}}, ["synth: max_turns: there is no global turn budget", "synth.recipe_options.<recipe>.max_turns"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_recipe_key_stops_before_any_work(tmp_path, monkeypatch, case):
    extra, expected = CASES[case]
    # the registered recipes as the registry holds them (a recipe installed or registered by another test adds to them)
    expected = [e.format(registered=", ".join(recipe_names())) if "{registered}" in e else e for e in expected]
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = _cfg(tmp_path, extra)
    ws = tmp_path / "ws"
    for args in (["run", "--config", str(cfg)], ["synth", "-w", str(ws), "--recipe", "visor", "--config", str(cfg)]):
        res = CliRunner().invoke(app, args)
        lines = [x for x in res.output.splitlines() if x.strip()]
        assert res.exit_code == 2, (args[0], res.output)
        assert len(lines) == 1 and all(e in lines[0] for e in expected), (args[0], res.output)
        assert not ws.exists(), args[0]


def test_visor_runs_its_own_budget_under_the_demo_config():
    cfg = load_config(REPO / "configs" / "demo.yaml")
    check_run_config(cfg, "configs/demo.yaml", base=REPO)
    visor = resolve_recipe("visor", cfg)
    assert (visor.free_turns, visor.env.max_turns) == (10, 10)  # the paper's 10, not a global 8
    assert visor.describe()["turn_budget"]["free_turns"] == 10
    assert resolve_recipe("vrag_rl", cfg).env.max_turns == 8


def test_a_budget_set_by_name_wins_for_that_recipe_only(tmp_path):
    cfg = load_config(_cfg(tmp_path, {"synth": {"recipes": ["visor", "vrag_rl"],
                                                "recipe_options": {"visor": {"max_turns": 4}}}}))
    assert resolve_recipe("visor", cfg).env.max_turns == 4
    assert resolve_recipe("vrag_rl", cfg).env.max_turns == 8  # its own budget: nothing global leaked over


def test_recipes_lists_each_recipes_budget_and_options():
    res = CliRunner().invoke(app, ["recipes"])
    assert res.exit_code == 0, res.output
    lines = {line.split(" ", 1)[0]: line for line in res.output.splitlines() if line.strip()}
    assert "max_turns 10;" in lines["visor"] and lines["visor"].endswith("scope, window")
    assert "grounding" not in lines["visor"] and "grounding, grounding_fallback" in lines["vrag_rl"]


def test_an_option_for_a_recipe_the_command_does_not_run_is_still_checked(tmp_path, monkeypatch):
    """The config file is validated whole: `synth --recipe vrag_rl` with a VISOR option VISOR does not have (VRAG-RL's
    `grounding_fallback`) stops with one line naming the key, exit 2, before any workspace folder exists."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = _cfg(tmp_path, {"synth": {"recipes": ["vrag_rl"], "recipe_options": {"visor": {"grounding_fallback": True}}}})
    ws = tmp_path / "ws"
    res = CliRunner().invoke(app, ["synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg)])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and "synth.recipe_options.visor: grounding_fallback: Extra inputs are not permitted" in lines[0], res.output
    assert not ws.exists()


def test_recipes_marks_the_roles_shown_pages_and_needs_the_judge():
    """`vrag-data recipes` says which roles a run needs (as the config check demands them: the judge included, the
    student a recipe's RL chain asks for) and which are shown page images (their model must read them)."""
    res = CliRunner().invoke(app, ["recipes"])
    assert res.exit_code == 0, res.output
    lines = {line.split(" ", 1)[0]: line for line in res.output.splitlines() if line.strip()}
    assert "roles: needs policy (sees pages), grounding (sees pages), judge;" in lines["vrag_rl"]
    assert "roles: needs policy, planner, reader (sees pages), judge;" in lines["mmdoc_r1"]
    assert "roles: needs policy (sees pages), judge, student (sees pages);" in lines["evisrag"]
    assert not any("?" in line.split("; filters")[0] for line in lines.values())
