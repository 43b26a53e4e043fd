"""`synth` checks, before any request is paid for, every role the recipe's filter chains will need at `filter` (the
difficulty filters' student included), and names every missing role at once: one line, exit 2, no request made. A
substitute the config asks for (`kind: extractive`, `same_as`, the filter's `missing: keep`) passes and is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import OpenAIServer
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app
from vrag_data.filters import Difficulty
from vrag_data.synth.ledger import read_manifest

# a module-wide fixture builds a workspace or serves for tens of seconds: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

STUDENT = "role 'student' (needed by filter difficulty of recipe evisrag's RL chain) is not configured"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def endpoint(url: str) -> dict:
    return {"endpoints": [{"base_url": url, "model": "teacher"}], "max_retries": 1, "backoff_s": 0.01, "timeout_s": 10,
            "sampling": {"temperature": 0.0, "max_tokens": 512}}


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def error_line(res) -> str:
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), res.output
    return lines[0]


def test_difficulty_needs_a_student_unless_its_missing_option_waives_it():
    assert [n.role for n in Difficulty().needs_roles()] == ["student"]
    assert Difficulty().needs_roles()[0].waiver == "missing: keep"
    assert Difficulty(missing="keep").needs_roles() == () and Difficulty(missing="drop").needs_roles() == ()


def test_a_student_the_rl_chain_needs_stops_synth_before_any_request(ws, tmp_path):
    with OpenAIServer(reply=teacher) as srv:
        cfg = write(tmp_path / "c.yaml", {"roles": {"policy": endpoint(srv.base_url), "judge": {"same_as": "policy"}}})
        res = invoke("synth", "-w", ws, "--recipe", "evisrag", "--config", cfg, "--limit", 1, "--run", "no-student", "-q")
        assert len(srv.requests) == 0  # not one episode was paid for
    line = error_line(res)
    assert STUDENT in line
    # the fix: the role's key, the offline reader, or the filter's own waiver (the RL chain's options key)
    assert "set roles.student (an endpoint" in line and "`roles.student: {kind: extractive}`" in line
    assert "filters.rl_options.evisrag.difficulty.missing: keep" in line
    assert not (ws / "runs" / "no-student").exists()


def test_every_missing_role_is_named_in_one_line(ws, tmp_path):
    with OpenAIServer(reply=teacher) as srv:
        cfg = write(tmp_path / "c.yaml", {"roles": {"policy": endpoint(srv.base_url)}})
        res = invoke("synth", "-w", ws, "--recipe", "evisrag", "--config", cfg, "--limit", 1, "--run", "two-missing", "-q")
        assert len(srv.requests) == 0
    line = error_line(res)
    assert "2 role problems:" in line
    assert "(1) roles.judge: recipe evisrag uses it" in line and f"(2) {STUDENT}" in line
    assert not (ws / "runs" / "two-missing").exists()


def test_several_recipes_name_all_their_missing_roles_before_any_work(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    (tmp_path / "docs").mkdir()
    cfg = write(tmp_path / "run.yaml", {
        "workspace": str(tmp_path / "ws"), "ingest": {"paths": [str(tmp_path / "docs")]}, "tasks": {"file": str(qa)},
        "synth": {"recipes": ["evisrag", "unidoc_rl", "mmdoc_r1"]},
        "roles": {"policy": {"kind": "oracle"}, "judge": {"kind": "rules"}}})
    res = invoke("run", "--config", cfg)
    line = error_line(res)
    assert "3 role problems:" in line
    assert "roles.planner: recipe mmdoc_r1 uses it" in line and "roles.reader: recipe mmdoc_r1 uses it" in line
    # one line for the student, naming every filter that needs it and each waiver key
    assert line.count("role 'student'") == 1
    assert ("role 'student' (needed by filter difficulty of recipe evisrag's RL chain; filter difficulty of recipe "
            "unidoc_rl's SFT and RL chains) is not configured") in line
    for key in ("filters.rl_options.evisrag", "filters.options.unidoc_rl", "filters.rl_options.unidoc_rl"):
        assert f"{key}.difficulty.missing: keep" in line
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("substitute", ["extractive", "same_as", "waived", "oracle_student"])
def test_a_configured_substitute_passes_and_is_recorded(ws, tmp_path, substitute):
    run = f"student-{substitute}"
    with OpenAIServer(reply=teacher) as srv:
        roles = {"policy": endpoint(srv.base_url), "judge": {"same_as": "policy"}}
        extra: dict = {}
        if substitute == "extractive":
            roles["student"] = {"kind": "extractive"}
        elif substitute in ("same_as", "oracle_student"):
            roles["student"] = {"same_as": "policy"}
        else:
            extra = {"filters": {"rl_options": {"evisrag": {"difficulty": {"missing": "keep"}}}}}
        args = ["synth", "-w", ws, "--recipe", "evisrag", "--limit", 1, "--run", run, "-q"]
        if substitute == "oracle_student":  # the student same_as an oracle policy would be gold-guided: it stops
            roles["judge"] = {"kind": "rules"}
            res = invoke(*args, "--config", write(tmp_path / "c.yaml", {"roles": roles}), "--policy", "oracle")
            line = error_line(res)
            assert "role 'student' (needed by filter difficulty of recipe evisrag's RL chain) is same_as policy (kind oracle)" in line
            assert len(srv.requests) == 0 and not (ws / "runs" / run).exists()
            return
        # without the substitute the same config stops; with it the run goes ahead
        bare = {k: v for k, v in roles.items() if k != "student"}
        assert STUDENT in error_line(invoke(*args, "--config", write(tmp_path / "bare.yaml", {"roles": bare})))
        assert len(srv.requests) == 0
        cli(*args, "--config", write(tmp_path / "c.yaml", {"roles": roles, **extra}))
        assert len(srv.requests) > 0
    m = read_manifest(ws / "runs" / run)
    assert m is not None
    if substitute == "extractive":
        assert m.config["roles_played"]["student"] == "extractive"
    elif substitute == "same_as":
        assert m.config["role_substitutions"]["student"] == "policy"
        assert m.config["roles_played"]["student"] == "teacher (same_as policy)"
    else:
        assert "student" not in m.config["roles_played"]
        assert m.config["recipe"]["rl_filter_settings"]["difficulty"]["missing"] == "keep"
