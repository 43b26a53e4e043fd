"""Correctness filter fed by the real model judge (teacher pool over HTTP to the scripted server)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.rewards_factory import make_task, make_traj
from vrag_data.config import EndpointConfig, RoleConfig
from vrag_data.filters import FilterChain, FilterContext, apply_chain
from vrag_data.filters.judging import judge_lookup, judge_trajectories
from vrag_data.teacher import RequestCache, TeacherPool
from vrag_data.teacher.judge import ModelJudge, RuleJudge

TASK = make_task(answer="42", fmt="Int", pages=["doc_3"])
STEPS = [("search", "q", ["doc_3"])]


def _reply(req: dict) -> str:
    # the judge says True only when the assistant's answer line mentions "forty-two"
    user = req["messages"][-1]["content"]
    text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
    return "<judge>True</judge>" if "forty-two" in text else "<judge>False</judge>"


def test_model_judge_drives_the_correctness_filter(tmp_path):
    trajs = [make_traj(TASK, STEPS + [("answer", a)], sample=i) for i, a in enumerate(["forty-two", "42", "7"])]
    with OpenAIServer(reply=_reply) as srv:
        role = RoleConfig(endpoints=[EndpointConfig(base_url=srv.base_url, model="teacher")], max_retries=2,
                          backoff_s=0.01, backoff_max_s=0.05)
        pool = TeacherPool({"judge": role}, RequestCache(tmp_path), "r1")

        async def go():
            async with pool:
                return await judge_trajectories(trajs, {TASK.task_id: TASK}, ModelJudge(pool))

        scores, errors = asyncio.run(go())
        label = ModelJudge(pool).label
    assert not errors and label == "judge teacher"
    kept, verdicts = apply_chain(trajs, [TASK], FilterChain.from_names(["correctness"]),
                                 FilterContext(judge=judge_lookup(scores, label=label)))
    # the model judge, not the rules, decided: "forty-two" kept, "42" dropped by this scripted judge
    assert [t.final_answer for t in kept] == ["forty-two"]
    assert all(v.reason.startswith("judge teacher score ") for v in verdicts)  # names the judge model


def test_rule_judge_and_missing_scores():
    trajs = [make_traj(TASK, STEPS + [("answer", a)], sample=i) for i, a in enumerate(["42", "7"])]
    scores, errors = asyncio.run(judge_trajectories(trajs, {TASK.task_id: TASK}, RuleJudge()))
    assert scores == {trajs[0].traj_id: 1.0, trajs[1].traj_id: 0.0} and not errors
    kept, verdicts = apply_chain(trajs, [TASK], FilterChain.from_names(["correctness"]),
                                 FilterContext(judge=judge_lookup({trajs[0].traj_id: 1.0})))
    assert [t.final_answer for t in kept] == ["42"]
    assert "judge failed" in verdicts[1].reason and not verdicts[1].passed


def test_judge_outage_stops_the_stage_and_a_rerun_pays_only_for_the_failures(tmp_path):
    from tests.support.openai_server import Faults
    from vrag_data.filters.judging import JudgeFailed

    trajs = [make_traj(TASK, STEPS + [("answer", a)], sample=i) for i, a in enumerate(["forty-two", "42"])]
    role = RoleConfig(endpoints=[EndpointConfig(base_url="http://127.0.0.1:9/v1", model="teacher")], max_retries=0)

    def run(base_url):
        r = role.model_copy(update={"endpoints": [EndpointConfig(base_url=base_url, model="teacher")]})
        pool = TeacherPool({"judge": r}, RequestCache(tmp_path), "r1")

        async def go():
            async with pool:
                return await judge_trajectories(trajs, {TASK.task_id: TASK}, ModelJudge(pool))

        return asyncio.run(go())

    with OpenAIServer(faults=Faults(p500=1.0)) as down:
        with pytest.raises(JudgeFailed, match=r"2 of 2 trajectories could not be judged.*roles\.judge"):
            run(down.base_url)
    with OpenAIServer(reply=_reply) as up:
        scores, errors = run(up.base_url)
        assert not errors and len(scores) == 2 and len(up.requests) == 2
        scores_again, _ = run(up.base_url)
        assert scores_again == scores and len(up.requests) == 2  # replayed from the request cache
