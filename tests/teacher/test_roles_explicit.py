"""Roles are explicit: a role a recipe uses and the config leaves out stops with one line; `same_as: policy` runs and
is recorded in the manifest, the dataset card and the report; every correctness decision is the configured judge's
(rule verdicts say "rules"); the report's answers-vs-gold table shows a self-judging policy at a glance."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import OpenAIServer
from tests.support.scripted_teacher import ANSWER, n_images, teacher, text_of
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app
from vrag_data.schema.records import Trajectory, Verdict
from vrag_data.store import read_records
from vrag_data.synth.ledger import read_manifest
from vrag_data.rewards.judge_prompts import unfenced

GRADER = "You grade the answers"  # the model judge's system prompt


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def endpoint(url: str, model: str = "teacher") -> dict:
    return {"endpoints": [{"base_url": url, "model": model}], "max_retries": 1, "backoff_s": 0.01, "timeout_s": 10,
            "sampling": {"temperature": 0.0, "max_tokens": 512}}


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def liar(req: dict) -> str:
    """A policy that answers "42" to everything and, asked to judge, says yes."""
    system = text_of(req["messages"][0])
    if GRADER in system:
        return "<judge>True</judge>"
    return teacher(req).replace(ANSWER, "42")


def test_a_role_the_recipe_uses_left_out_stops_synth_with_one_line(ws, tmp_path):
    cfg = write(tmp_path / "c.yaml", {"roles": {"policy": endpoint("http://127.0.0.1:9/v1")}})
    res = invoke("synth", "-w", ws, "--recipe", "evisrag", "--config", cfg, "--run", "no-judge", "-q")
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and "roles.judge: recipe evisrag uses it" in lines[0], res.output
    assert "`kind: rules`, or `same_as: policy`" in lines[0]
    assert not (ws / "runs" / "no-judge").exists()  # stopped before any work


@pytest.mark.slow
def test_self_judging_policy_is_recorded_and_flagged_against_the_gold(ws, tmp_path):
    run = "liar-42"
    roles = {"policy": endpoint("POLICY"), "judge": {"same_as": "policy"}}
    opts = {"filters": {"rl_options": {"evisrag": {"difficulty": {"missing": "keep"}}}}}
    with OpenAIServer(reply=liar) as srv:
        roles["policy"] = endpoint(srv.base_url)
        cfg = write(tmp_path / "c.yaml", {"roles": roles, **opts})
        cli("synth", "-w", ws, "--recipe", "evisrag", "--config", cfg, "--limit", 3, "--run", run, "-q")
        m = read_manifest(ws / "runs" / run)
        assert m.config["roles"]["judge"] == {**m.config["roles"]["judge"], "same_as": "policy"}
        assert m.config["role_substitutions"] == {"judge": "policy"}
        assert m.config["roles_played"]["judge"] == "teacher (same_as policy)"
        out = cli("filter", "-w", ws, "--run", run, "--config", cfg)
        assert "judge: judge teacher (same_as policy)" in out
        judged = [r for r in srv.requests if r.body and GRADER in json.dumps(r.body)]
        assert judged  # the policy's own endpoint judged
    verdicts = [v for v in read_records(str(ws / "runs" / run / "verdicts"), Verdict) if v.filter == "correctness"]
    assert verdicts and all(v.passed and v.reason.startswith("judge teacher (same_as policy) score 1.00") for v in verdicts)
    assert all("'42'" in v.reason for v in verdicts)  # every answer was 42 and every one passed

    cli("export", "-w", ws, "--run", run, "--format", "hf")
    card = (ws / "exports" / run / "README.md").read_text()
    assert "## Roles" in card and "- judge: teacher (same_as policy)" in card and "Self-judged" in card
    assert "difficulty filter `missing: keep`" in card

    out = cli("report", "-w", ws, "--run", run, "--no-html")
    n = len(verdicts)
    line = next(x for x in out.splitlines() if x.startswith(f"answers vs gold: run {run}"))
    assert f"judge judge teacher (same_as policy): n {n}, judge pass rate 1.000, gold agreement 0.000, gap +1.000" in line
    assert "FLAG: judge is the policy (same_as policy); pass rate exceeds gold agreement by 1.00" in line
    con = duckdb.connect(str(ws / "report.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT judge_model, same_as, n, judge_pass_rate, gold_agreement, flagged FROM answers_vs_gold "
                          "WHERE run_id = ?", [run]).fetchone()
    finally:
        con.close()
    assert row == ("teacher", "policy", n, 1.0, 0.0, True)

    # the same run re-filtered with the rule scorers: the verdicts say "rules", and they fail the 42s
    rules = write(tmp_path / "r.yaml", {"roles": {"judge": {"kind": "rules"}}, **opts})
    assert "judge: rules" in cli("filter", "-w", ws, "--run", run, "--config", rules)
    verdicts = [v for v in read_records(str(ws / "runs" / run / "verdicts"), Verdict) if v.filter == "correctness"]
    assert verdicts and all(not v.passed and v.reason.startswith("rules score 0.00 < 0.5") for v in verdicts)


def _words(k: int) -> str:
    """The answer in words, different per context size (so each variant's judge request is its own)."""
    return f"six hundred and seventy-three, from {k} page(s)"


def _judged(srv: OpenAIServer) -> list[tuple[str, str]]:
    """(reference, prediction) of every request the judge server got."""
    out = []
    for r in srv.requests:
        user = text_of(r.body["messages"][-1])
        quoted = unfenced(user)
        assert GRADER in text_of(r.body["messages"][0]) and len(quoted) == 3
        out.append((quoted[1], quoted[2]))
    return out


@pytest.mark.slow
def test_every_correctness_decision_goes_to_the_configured_judge(ws, tmp_path):
    """EVisRAG's top-k variants, its student's attempts and VISOR's restated answer are decided by the model judge.
    The judge here accepts everything, where the rule scorers would refuse: an insufficient context answered
    with a number, and a restatement in words."""
    def policy(req: dict) -> str:
        first = req["messages"][0]
        if "You verify an answer" in text_of(first):
            return "<think>The extra page confirms it.</think><answer>six hundred seventy-three</answer>"
        if first["role"] == "user" and "four steps" in text_of(first):  # EVisRAG, the episode and each top-k variant
            k = n_images(first)
            lines = "\n".join(f"[{i}]: {'net income 673' if i == 1 else 'no relevant information'}" for i in range(1, k + 1))
            return (f"<observe>Image 1 has the table.</observe>\n<evidence>\n{lines}\n</evidence>\n<think>Image 1 says it."
                    f"</think>\n<answer>{_words(k)}</answer>")
        return teacher(req)

    with OpenAIServer(reply=policy) as pol, OpenAIServer(reply=lambda req: "<judge>True</judge>", models=["grader"]) as judge:
        cfg = write(tmp_path / "c.yaml", {"roles": {"policy": endpoint(pol.base_url), "judge": endpoint(judge.base_url, "grader"),
                                                    "student": {"kind": "extractive"}},
                                          # the scripted VISOR teacher misbehaves on purpose: judge it on its answer only
                                          "filters": {"chains": {"visor": ["correctness"]}}})
        for recipe in ("evisrag", "visor"):
            cli("synth", "-w", ws, "--recipe", recipe, "--config", cfg, "--limit", 1, "--run", f"mj-{recipe}", "-q")
            cli("filter", "-w", ws, "--run", f"mj-{recipe}", "--config", cfg)
        assert not any(GRADER in text_of(r.body["messages"][0]) for r in pol.requests)  # the policy judged nothing
        judged = _judged(judge)
    assert all(r.body["model"] == "grader" for r in judge.requests)
    # EVisRAG: each top-k variant's answer (in words: the rules refuse it) was judged, and the judge kept it
    aug = read_records(str(next((ws / "runs" / "mj-evisrag" / "trajectories").glob("aug-*.parquet"))), Trajectory)
    kept = {a.final_answer for a in aug}
    assert len(kept) >= 2 and kept <= {_words(k) for k in range(1, 6)}
    assert {(ANSWER, w) for w in kept} <= set(judged)
    # the student's answers were scored by the judge (all accepted, where the rules refuse some)
    attempts = pq.read_table(ws / "runs" / "mj-evisrag" / "student" / "rl-attempts.parquet").to_pylist()  # its RL chain
    assert attempts and all(a["correct"] for a in attempts if a["answer"])
    assert {a["answer"] for a in attempts if a["answer"]} <= {p for _, p in judged}
    # VISOR: the restated answer in words is checked against the trajectory's answer by the judge, and kept
    assert (ANSWER, "six hundred seventy-three") in judged
    vaug = list((ws / "runs" / "mj-visor" / "trajectories").glob("aug-*.parquet"))
    assert vaug and pq.read_table(vaug[0]).num_rows >= 1
