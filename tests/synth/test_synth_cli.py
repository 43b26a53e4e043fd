"""Every recipe end to end through the real client against a local scripted OpenAI-compatible server
(malformed replies, 429s, 500s, truncated and empty bodies, slow responses), plus resume, request-cache
replay, a failing endpoint and the configuration errors that must stop a run before any work."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from pyarrow.parquet import read_table
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import Faults, OpenAIServer
from tests.support.scripted_teacher import ANSWER, GROUNDING_BOX, TEACHER_BOX, teacher
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app
from tests.support.shipped import SHIPPED

RECIPES = SHIPPED
from vrag_data.env import parse_action
from vrag_data.schema.records import Verdict
from vrag_data.store.run import RunDir
from vrag_data.store import read_records
from vrag_data.synth.ledger import read_manifest, read_trajectories

# a module-wide fixture builds a workspace or serves for tens of seconds: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

LIMIT = 2


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def write_config(path, base_url, *, max_retries=4, extra=None, **role):
    policy = {"endpoints": [{"base_url": base_url, "model": "teacher", **role}], "backoff_s": 0.01, "backoff_max_s": 0.05,
              "max_retries": max_retries, "timeout_s": 10, "sampling": {"temperature": 0.0, "max_tokens": 512}}
    extra = dict(extra or {})
    # every role the recipes use is named (nothing is filled in): the teacher plays the judge, grounding, reader and
    # planner (`same_as: policy`, recorded in the run); the student the difficulty filters need is its own role, served
    # by the same server (synth checks it before any episode); `extra["roles"]` replaces single roles
    student = {"endpoints": [{"base_url": base_url, "model": "teacher"}], "backoff_s": 0.01, "backoff_max_s": 0.05,
               "max_retries": max_retries}
    roles = {"policy": policy, **{r: {"same_as": "policy"} for r in ("judge", "grounding", "reader", "planner")},
             "student": student, **extra.pop("roles", {})}
    data = {"roles": roles, **extra}
    path.write_text(yaml.safe_dump(data))
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_through_the_real_client_with_faults(ws, tmp_path, recipe):
    faults = Faults(script=["429", "500", "ok", "slow", "truncate", "empty", "drop"], spike_s=0.3)
    with OpenAIServer(reply=teacher, faults=faults) as srv:
        cfg = write_config(tmp_path / "cfg.yaml", srv.base_url, max_retries=6)  # all 5 failures may hit one request
        run = f"model-{recipe}"
        out = cli("synth", "-w", ws, "--recipe", recipe, "--config", cfg, "--limit", LIMIT, "--run", run, "-q")
        outcomes = [r.outcome for r in srv.requests]
        run_dir = ws / "runs" / run
        trajs = read_trajectories(run_dir)
        assert len(trajs) == LIMIT, out
        for t in trajs:
            assert t.status == "answered" and t.final_answer == ANSWER, (t.status, t.reason, [x.assistant for x in t.turns])
            assert t.provenance.policy == "model" and t.provenance.models["policy"] == "teacher"
            assert t.n_invalid >= 1  # the scripted teacher misbehaves once per episode
            bad = [x for x in t.turns if x.action.kind == "invalid"]
            for x in bad:
                assert x.observation is not None and x.observation.kind == "error" and x.observation.text
            assert t.usage.requests >= 2 and t.usage.prompt_tokens > 0
            assert all(x.request_ids for x in t.turns)
        assert {"429", "500", "slow", "truncate", "empty", "drop"} <= set(outcomes)  # faults were served and retried
        assert sum(t.usage.retries for t in trajs) >= 5  # 429, 500, truncate, empty, drop
        _recipe_checks(recipe, trajs)
        manifest = read_manifest(run_dir)
        assert manifest is not None and manifest.status == "finished" and manifest.stats["invalid"] >= LIMIT
        assert manifest.workspace == manifest.config["workspace"] == str(Path(ws).resolve())  # not the config's default

        # resume: the same run id makes zero new requests
        srv.clear()
        out = cli("synth", "-w", ws, "--recipe", recipe, "--config", cfg, "--limit", LIMIT, "--run", run, "-q")
        assert srv.requests == [] and f"0 episode(s) rolled out, {LIMIT} already done" in out

        # the judge is the policy's endpoint (same_as: policy); its verdicts are cached like any request; the
        # student (difficulty filters) is its own role, here served by the same scripted server
        fcfg = tmp_path / "filter.yaml"
        fcfg.write_text(yaml.safe_dump({"roles": {"student": {"endpoints": [{"base_url": srv.base_url, "model": "teacher"}],
                                                              "backoff_s": 0.01, "backoff_max_s": 0.05, "max_retries": 6}}}))
        cli("filter", "-w", ws, "--run", run, "--config", fcfg)
        verdicts = read_records(str(run_dir / "verdicts" / "filters.parquet"), Verdict)
        assert {v.traj_id for v in verdicts} == {t.traj_id for t in trajs}
        for v in verdicts:
            if v.filter == "structure":  # the recipes that check structure drop episodes with invalid turns
                assert not v.passed and "invalid turn" in v.reason
        judged = sum(1 for r in srv.requests if "grade the answers" in str(r.body))
        rd = RunDir(str(run_dir))
        attempts = [a for stage in ("sft", "rl") if Path(rd.student_attempts_file(stage)).exists()
                    for a in read_table(rd.student_attempts_file(stage)).to_pylist()]
        rl_path = Path(rd.rl_verdicts_path)
        verdicts_all = verdicts + (read_records(str(rl_path), Verdict) if rl_path.exists() else [])
        if recipe in ("unidoc_rl", "evisrag"):
            # the student ran the recipe's own loop on every task its chains asked about (SFT and RL data)
            assert len({a["task_id"] for a in attempts}) >= 1
            diff = [v for v in verdicts_all if v.filter == "difficulty"]  # UniDoc-RL: structure drops them first
            # EVisRAG's curriculum runs on the RL side of its 8:2 split: 2 tasks give round(0.4) = 0 RL tasks, so the
            # split decides every trajectory and the student is asked about none of them
            split = [v for v in verdicts_all if v.filter == "split"]
            assert recipe == "unidoc_rl" or (len(split) >= LIMIT and not diff)
            assert all("student" in v.reason and "not applied" not in v.reason for v in diff)
        srv.clear()
        cli("filter", "-w", ws, "--run", run, "--config", fcfg)
        assert judged >= 1 and srv.requests == []


def _recipe_checks(recipe, trajs):
    for t in trajs:
        texts = [x.assistant for x in t.turns]
        if recipe == "vrag_rl":
            g = t.extra["grounding"]
            assert g and g[0]["used"] and g[0]["teacher_boxes"] == [[float(v) for v in TEACHER_BOX]]
            crop = next(x for x in t.turns if x.action.kind == "crop")
            assert crop.action.boxes == [[float(v) for v in GROUNDING_BOX]]  # the expert's box replaced the teacher's
            assert str(GROUNDING_BOX).replace(" ", "") in crop.assistant.replace(" ", "")
            assert len(crop.request_ids) == 2  # policy + grounding
            assert "unclosed <search>" in t.extra["invalid_reasons"][0]
        elif recipe == "unidoc_rl":
            c = t.extra["candidates"][0]
            assert c["how"] == "index" and c["choice"] == c["order"][0]
            kinds = [x.action.kind for x in t.turns]
            assert kinds == ["search", "invalid", "select", "crop", "answer"], kinds
            assert any("candidate step" in r for r in t.extra["invalid_reasons"])  # the [99] reply, re-prompted
        elif recipe == "visor":
            assert t.turns[0].action.kind == "invalid" and "missing <think>" in t.turns[0].action.reason
            assert [x.action.kind for x in t.turns[1:]] == ["search", "crop", "crop", "answer"]
            assert t.turns[2].observation.kind == "error" and "outside the image" in t.turns[2].observation.text
            assert len(t.crops) == 1
            assert t.evidence_space
        elif recipe == "evisrag":
            assert [x.action.kind for x in t.turns] == ["invalid", "answer"]
            assert len(t.turns[-1].action.evidence) == len(t.extra["shown_pages"])
            assert isinstance(t.extra["sufficient"], bool)
        elif recipe == "mmdoc_r1":
            # a well-formed read of a page that does not exist: the action stays, the environment re-prompts
            assert [x.action.kind for x in t.turns] == ["search", "read", "read", "finish", "invalid", "answer"]
            assert t.turns[1].observation.kind == "error" and "page 99 does not exist" in t.turns[1].observation.text
            assert "page 99 does not exist" in t.extra["invalid_reasons"][0]
            assert t.turns[2].observation.text.startswith("Read page(s) 2")
            assert t.turns[-1].role == "answer" and t.extra["plan"].startswith("Here is my proposed")
        for x in t.turns:
            if x.action.kind not in ("invalid", "read"):
                assert parse_action(x.assistant, recipe) == x.action
        assert texts


def test_request_cache_replays_finished_calls_when_shards_are_lost(ws, tmp_path):
    with OpenAIServer(reply=teacher) as srv:
        cfg = write_config(tmp_path / "cfg.yaml", srv.base_url)
        args = ("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 1, "--run", "cache-replay", "-q")
        cli(*args)
        first = len(srv.requests)
        before = read_trajectories(ws / "runs" / "cache-replay")
        shutil.rmtree(ws / "runs" / "cache-replay" / "trajectories")  # as if the process died before the flush
        srv.clear()
        cli(*args)
        after = read_trajectories(ws / "runs" / "cache-replay")
        assert first > 0 and srv.requests == []  # every call replayed from the request cache
        assert [x.assistant for x in after[0].turns] == [x.assistant for x in before[0].turns]
        assert after[0].usage.cache_hits == after[0].usage.requests


def test_policy_flags_need_the_other_roles_named_and_same_as_plays_them(ws, tmp_path):
    with OpenAIServer(reply=teacher) as srv:
        flags = ["--policy-url", srv.base_url, "--policy-model", "teacher", "--limit", 1, "-q"]
        res = invoke("synth", "-w", ws, "--recipe", "mmdoc_r1", *flags, "--run", "flags-bare")
        assert res.exit_code == 2 and "roles.planner: recipe mmdoc_r1 uses it" in res.output, res.output
        assert not (ws / "runs" / "flags-bare").exists() and srv.requests == []  # stopped before any work
        cfg = tmp_path / "same.yaml"
        cfg.write_text(yaml.safe_dump({"roles": {r: {"same_as": "policy"} for r in ("planner", "reader", "judge")}}))
        cli("synth", "-w", ws, "--recipe", "mmdoc_r1", *flags, "--config", cfg, "--run", "flags")
        t = read_trajectories(ws / "runs" / "flags")[0]
        assert t.status == "answered"
        assert t.provenance.models["planner"] == "teacher" and t.provenance.models["reader"] == "teacher"
        systems = {str(r.body["messages"][0].get("content"))[:30] for r in srv.requests}
        assert any(s.startswith("You plan how") for s in systems) and any(s.startswith("You summarise") for s in systems)
        m = read_manifest(ws / "runs" / "flags")
        assert m.config["role_substitutions"] == {"judge": "policy", "planner": "policy", "reader": "policy"}


def test_an_endpoint_that_keeps_failing_ends_episodes_with_error_not_the_run(ws, tmp_path):
    with OpenAIServer(reply=teacher, faults=Faults(p500=1.0)) as srv:
        cfg = write_config(tmp_path / "cfg.yaml", srv.base_url, max_retries=1)
        res = invoke("synth", "-w", ws, "--recipe", "visor", "--config", cfg, "--limit", 2, "--run", "failing", "-q")
        assert res.exit_code == 3, res.output  # no episode finished: the stage did not do its job
        assert "error: all 2 episode(s) of run failing ended in error" in res.output
        trajs = read_trajectories(ws / "runs" / "failing")
        assert len(trajs) == 2 and all(t.status == "error" for t in trajs)
        assert all("HTTP 500" in t.reason and "gave up after 2 attempts" in t.reason for t in trajs)
        assert read_manifest(ws / "runs" / "failing").status == "finished"
        assert "ended in error" in res.output


@pytest.mark.parametrize("case", ["unknown_key", "missing_key_var", "unreachable", "bad_option", "no_policy", "bad_policy"])
def test_bad_configuration_fails_before_any_work_with_one_line(ws, tmp_path, monkeypatch, case):
    monkeypatch.delenv("VRAG_TEST_MISSING_KEY", raising=False)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    args = ["synth", "-w", ws, "--recipe", "vrag_rl", "--run", f"bad-{case}", "-q"]
    if case == "unknown_key":
        args += ["--config", write_config(tmp_path / "c.yaml", url, extra={"synth": {"max_turn": 3}})]
        want = "synth.max_turn"
    elif case == "missing_key_var":
        args += ["--config", write_config(tmp_path / "c.yaml", url, api_key_env="VRAG_TEST_MISSING_KEY")]
        want = "VRAG_TEST_MISSING_KEY"
    elif case == "unreachable":
        args += ["--config", write_config(tmp_path / "c.yaml", url)]
        want = "unreachable"
    elif case == "bad_option":
        args += ["--policy", "oracle", "--config", write_config(tmp_path / "c.yaml", url, extra={"synth": {"recipe_options": {"vrag_rl": {"windw": 2}}}})]
        want = "synth.recipe_options.vrag_rl: windw"
    elif case == "no_policy":
        want = "no policy role"
    else:
        args += ["--policy", "gpt"]
        want = "--policy 'gpt'"
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.strip().splitlines() if x.strip()]
    assert lines[0].startswith("error:") and want in " ".join(lines), res.output
    assert not (ws / "runs" / f"bad-{case}").exists()  # nothing was started


def test_unidoc_candidate_step_accepts_a_proposed_box_matched_by_iou(ws, tmp_path):
    def reply(req):
        last = req["messages"][-1]
        text = last["content"] if isinstance(last["content"], str) else " ".join(p.get("text", "") for p in last["content"])
        if "candidate regions outlined" in text:
            return "<think>The figure area.</think>\n<bbox>[0, 0, 1000, 1000]</bbox>"
        return teacher(req)

    with OpenAIServer(reply=reply) as srv:
        cfg = write_config(tmp_path / "cfg.yaml", srv.base_url)
        cli("synth", "-w", ws, "--recipe", "unidoc_rl", "--config", cfg, "--limit", 1, "--run", "unidoc-box", "-q")
    t = read_trajectories(ws / "runs" / "unidoc-box")[0]
    step = t.extra["candidates"][0]
    assert step["how"].startswith(("own box", "box matched to region"))
    crop = next(x for x in t.turns if x.action.kind == "crop")
    assert crop.action.thought == "The figure area." and len(t.crops) == 1
    if step["how"].startswith("own box"):
        assert crop.action.boxes == [[0.0, 0.0, 1000.0, 1000.0]]


@pytest.mark.parametrize("mode", ["down", "unreadable"])
def test_grounding_role_outage_ends_the_episode_unless_a_fallback_is_asked_for(ws, tmp_path, mode):
    """VRAG-RL's grounding expert is part of the recipe: when it gives no box the crop is not silently kept."""
    def grounding_reply(req):  # noqa: ANN001, ANN202
        return "I would rather not say."

    faults = Faults(p500=1.0) if mode == "down" else None
    with OpenAIServer(reply=teacher) as policy, OpenAIServer(reply=grounding_reply, faults=faults) as ground:
        role = {"endpoints": [{"base_url": ground.base_url, "model": "teacher"}], "max_retries": 0, "timeout_s": 10}
        cfg = write_config(tmp_path / "cfg.yaml", policy.base_url, extra={"roles": {"grounding": role}})
        data = yaml.safe_load(cfg.read_text())
        data["roles"]["policy"] = yaml.safe_load(write_config(tmp_path / "p.yaml", policy.base_url).read_text())["roles"]["policy"]
        cfg.write_text(yaml.safe_dump(data))
        invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 1, "--run", f"g-{mode}", "-q")
        (t,) = read_trajectories(ws / "runs" / f"g-{mode}")
        assert t.status == "error" and "role grounding" in t.reason and "grounding_fallback" in t.reason
        # asked for explicitly: the teacher's box is kept and every such turn says so
        data["synth"] = {"recipe_options": {"vrag_rl": {"grounding_fallback": True}}}
        cfg.write_text(yaml.safe_dump(data))
        invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 1, "--run", f"gf-{mode}", "-q")
    (t,) = read_trajectories(ws / "runs" / f"gf-{mode}")
    assert t.status == "answered", t.reason
    notes = t.extra["grounding"]
    assert notes and all(n["used"] is False and n["fallback"] == "teacher_box" for n in notes)


@pytest.mark.parametrize("role", ["planner", "reader"])
def test_mmdoc_side_role_outage_ends_the_episode_naming_the_role(ws, tmp_path, role):
    with OpenAIServer(reply=teacher) as policy, OpenAIServer(reply=teacher, faults=Faults(p500=1.0)) as down:
        data = yaml.safe_load(write_config(tmp_path / "cfg.yaml", policy.base_url).read_text())
        data["roles"][role] = {"endpoints": [{"base_url": down.base_url, "model": "teacher"}], "max_retries": 0, "timeout_s": 10}
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(data))
        invoke("synth", "-w", ws, "--recipe", "mmdoc_r1", "--config", tmp_path / "cfg.yaml", "--limit", 1, "--run", f"m-{role}", "-q")
    (t,) = read_trajectories(ws / "runs" / f"m-{role}")
    assert t.status == "error" and f"role {role}" in t.reason, t.reason
    assert len(down.requests) >= 1 and all(r.outcome != "ok" for r in down.requests)
