"""Roles that are shown page images need a vision model: the name check, `vision: true/false`, the recipes' own
declarations, the run config check from the CLI (one line, before any work), and every shipped config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.config import load_config, parse_config
from vrag_data.config_check import check_run_config
from vrag_data.errors import ConfigError
from vrag_data.qgen.plan import shown_in_generation
from vrag_data.recipe import resolve_recipe
from vrag_data.qgen.plan import run_vision_problem
from vrag_data.teacher.vision import (ShownPages, looks_like_vision, one_line, recipe_shown_pages,
                                      vision_problems)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
URL = "http://127.0.0.1:9/v1"
TEXT_ONLY = "Qwen/Qwen2.5-7B-Instruct"
VLM = "Qwen/Qwen2.5-VL-7B-Instruct"

NAMES = {
    "Qwen/Qwen2.5-VL-72B-Instruct": True, "Qwen/Qwen3-VL-235B-A22B-Instruct": True, "Qwen/Qwen2-VL-7B-Instruct": True,
    "llava-hf/llava-1.5-7b-hf": True, "OpenGVLab/InternVL2-8B": True, "openbmb/MiniCPM-V-2_6": True,
    "mistralai/Pixtral-12B-2409": True, "google/gemma-3-27b-it": True, "meta-llama/Llama-3.2-11B-Vision-Instruct": True,
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": True, "microsoft/Phi-4-multimodal-instruct": True, "gpt-4o": True,
    "claude-3-5-sonnet-latest": True, "gemini-2.0-flash": True, "THUDM/glm-4v-9b": True, "deepseek-ai/deepseek-vl2": True,
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": True, "HuggingFaceTB/SmolVLM-Instruct": True,
    TEXT_ONLY: False, "Qwen/Qwen3-8B": False, "google/gemma-3-1b-it": False, "meta-llama/Llama-3.1-8B-Instruct": False,
    "mistralai/Mistral-7B-Instruct-v0.3": False, "gpt-3.5-turbo": False, "deepseek-ai/DeepSeek-V3": False,
    "THUDM/glm-4-9b-chat": False, "microsoft/phi-4": False,
    "teacher": None, "my-served-alias": None,  # a served alias says nothing about the model behind it
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_names(name: str) -> None:
    assert looks_like_vision(name) is NAMES[name]


def _roles(**roles: dict) -> dict:
    return parse_config({"roles": roles}).roles


def _ep(model: str, **more: object) -> dict:
    return {"endpoints": [{"base_url": URL, "model": model}], **more}


JUDGE = [ShownPages("judge", "it answers from the pages")]


def test_text_only_judge_shown_pages_is_one_line_naming_role_model_and_fix() -> None:
    line = one_line(vision_problems(JUDGE, _roles(judge=_ep(TEXT_ONLY))))
    assert line == (f"roles.judge: model {TEXT_ONLY} is not a vision model, and role judge is shown page images (it "
                    f"answers from the pages); name a vision model (e.g. Qwen/Qwen2.5-VL-7B-Instruct), or set "
                    f"roles.judge.vision: true if this model reads images")


def test_vision_setting_overrides_the_name_and_false_is_refused() -> None:
    assert vision_problems(JUDGE, _roles(judge=_ep(TEXT_ONLY, vision=True))) == []
    assert vision_problems(JUDGE, _roles(judge=_ep(VLM))) == []
    [line] = vision_problems(JUDGE, _roles(judge=_ep(VLM, vision=False)))
    assert line.startswith("roles.judge.vision: false, but role judge is shown page images") and "cannot work" in line
    # a role that is not shown pages is not judged; no model (rules, oracle) is not judged
    assert vision_problems([], _roles(judge=_ep(TEXT_ONLY))) == []
    assert vision_problems(JUDGE, _roles(judge={"kind": "rules"})) == []
    # a substitution is judged as the role it plays, and the fix names where the setting lives
    [line] = vision_problems(JUDGE, _roles(policy=_ep(TEXT_ONLY), judge={"same_as": "policy"}))
    assert line.startswith(f"roles.judge (same_as policy): model {TEXT_ONLY}") and "set roles.policy.vision: true" in line


def test_each_recipe_declares_which_roles_see_pages() -> None:
    seen = {r: sorted({u.role for u in recipe_shown_pages([resolve_recipe(r, parse_config({}))])})
            for r in ("vrag_rl", "mmdoc_r1", "unidoc_rl")}
    # mmdoc_r1's seeker reads the reader's text, never a page: only its reader is shown images
    assert seen == {"vrag_rl": ["grounding", "policy"], "mmdoc_r1": ["reader"], "unidoc_rl": ["policy", "student"]}


def test_generation_shows_pages_to_the_writer_and_the_answerer() -> None:
    roles = _roles(question_writer=_ep(VLM), judge=_ep(TEXT_ONLY), policy={"kind": "oracle"})
    assert [u.role for u in shown_in_generation(roles, model_writer=True)] == ["question_writer", "judge"]
    roles = _roles(judge=_ep(TEXT_ONLY), student=_ep(VLM))  # the student answers when it is a model
    assert [u.role for u in shown_in_generation(roles, model_writer=False)] == ["student"]


def _run_cfg(tmp_path: Path, roles: dict, recipe: str = "vrag_rl") -> Path:
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    cfg = {"workspace": str(tmp_path / "ws"), "tasks": {"file": str(qa)}, "synth": {"recipes": [recipe]},
           "roles": roles}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_with_a_text_only_judge_that_verifies_questions_stops_before_any_work(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = _run_cfg(tmp_path, {"policy": {"kind": "oracle"}, "grounding": {"same_as": "policy"},
                              "question_writer": _ep(VLM), "judge": _ep(TEXT_ONLY)})
    res = CliRunner().invoke(app, ["run", "--config", str(cfg)])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and f"roles.judge: model {TEXT_ONLY} is not a vision model" in lines[0], res.output
    assert "roles.judge.vision: true" in lines[0] and str(cfg) in lines[0]
    assert not (tmp_path / "ws").exists()


def test_recipe_owns_which_roles_need_vision(tmp_path: Path) -> None:
    # vrag_rl's policy looks at pages: a text-only policy is refused; mmdoc_r1's seeker does not: it passes
    vrag = load_config(_run_cfg(tmp_path, {"policy": _ep(TEXT_ONLY), "grounding": _ep(VLM), "judge": {"kind": "rules"}}))
    with pytest.raises(ConfigError, match=r"roles\.policy: model Qwen/Qwen2\.5-7B-Instruct is not a vision model"):
        check_run_config(vrag, "run.yaml")
    mmdoc = load_config(_run_cfg(tmp_path, {"policy": _ep(TEXT_ONLY), "planner": _ep(TEXT_ONLY), "reader": _ep(VLM),
                                            "judge": {"kind": "rules"}}, recipe="mmdoc_r1"))
    check_run_config(mmdoc, "run.yaml")


SHIPPED = sorted(p for p in CONFIGS.rglob("*.yaml") if "train" not in p.parts)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_shipped_configs_name_vision_models_where_pages_are_shown(path: Path) -> None:
    cfg = load_config(path)
    recipes = [resolve_recipe(n, cfg) for n in cfg.synth.recipes or ["vrag_rl"]]
    assert run_vision_problem(cfg, recipes) == ""
    # and as a question generation run (a model writer added): the answerer that verifies sees the pages
    writer = {"question_writer": {"endpoints": [{"base_url": URL, "model": VLM}]}}
    gen = parse_config({**cfg.model_dump(mode="json", exclude={"roles"}),
                        "roles": {**cfg.model_dump(mode="json")["roles"], **writer}})
    assert one_line(vision_problems(shown_in_generation(gen.roles, model_writer=True), gen.roles)) == ""
