"""`vrag-data submit`: the synth deployment's parameters are checked before anything is submitted, so a bad config
or a wrong model name fails in seconds with one line, without Prefect (the server named here is not even running)."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from tests.support.openai_server import OpenAIServer
from tests.support.roles import ORACLE_ROLES
from vrag_data.cli.main import app

NO_SERVER = "http://127.0.0.1:9/api"  # nothing listens there: a submission would fail on the connection


def _config(tmp_path, **extra) -> str:
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    cfg = {"workspace": "ws", "tasks": {"file": str(qa)}, "roles": ORACLE_ROLES, "synth": {"recipes": ["visor"]}, **extra}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    return "run.yaml"  # relative: resolved against the folder the command runs in


def _submit(tmp_path, monkeypatch, *params: str):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREFECT_API_URL", NO_SERVER)
    return CliRunner().invoke(app, ["submit", "vrag-data/synth", *(x for p in params for x in ("--param", p))])


def test_a_bad_config_fails_before_anything_is_submitted(tmp_path, monkeypatch):
    cfg = _config(tmp_path)
    res = _submit(tmp_path, monkeypatch, f"config={cfg}", 'recipe="visr"')
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert "synth.recipes[visr]: unknown recipe" in lines[0] and "(synth.recipes is from --param recipe)" in lines[0]
    assert "submitted" not in res.output and not (tmp_path / "ws").exists()


def test_every_wrong_model_name_fails_before_anything_is_submitted(tmp_path, monkeypatch):
    cfg = _config(tmp_path)
    with OpenAIServer(models=["served"]) as srv:
        eps = {"policy": {"base_url": srv.base_url, "model": "policy-typo"},
               "judge": {"base_url": srv.base_url, "model": "judge-typo"}}
        res = _submit(tmp_path, monkeypatch, f"config={cfg}", f"endpoints={json.dumps(eps)}")
    line = " ".join(res.output.split())
    assert res.exit_code == 2 and line.startswith("error: 2 wrong model names: "), res.output
    assert "does not serve model 'policy-typo'" in line and "does not serve model 'judge-typo'" in line
    assert "(roles.judge is from --param endpoints.judge)" in line and "submitted" not in line
