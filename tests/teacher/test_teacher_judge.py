"""Judges: verdict parsing, the model judge over HTTP (cached, bounded), VISOR's honesty gate, rule fallback."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.openai_server import Faults, OpenAIServer
from vrag_data.config import EndpointConfig, RoleConfig
from vrag_data.teacher import RequestCache, TeacherPool
from vrag_data.teacher.judge import JudgeUnavailable, HONESTY_SCORE, ModelJudge, RuleJudge, answer_reward, make_judge, parse_judge
from vrag_data.rewards.judge_prompts import unfenced


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("<judge>True</judge>", True),
        ("<judge> false </judge>", False),
        ("<JUDGE>TRUE</JUDGE>", True),
        ("The answer matches. <judge>True.</judge>", None),  # the verdict alone, or nothing: prose is unreadable
        ("<think>maybe <judge>False</judge></think><judge>True</judge>", True),
        ("<judge>False</judge> wait, <judge>True</judge>", None),  # two verdicts: unreadable
        ("<judge>True</judge> ... but the answer is not correct", None),  # a verdict followed by contrary prose
        ("<judge>True</judge>\n", True),
        ("True", True),
        ("false.", False),
        ("<judge>maybe</judge>", None),
        ("I think it is right", None),
        ("", None),
        ("<judge>True", None),  # truncated tag
    ],
)
def test_parse_judge(text, want):
    assert parse_judge(text) is want


def _pool(url: str, tmp_path) -> TeacherPool:  # noqa: ANN001
    ep = EndpointConfig(base_url=url, model="teacher")
    roles = {"policy": RoleConfig(endpoints=[ep], backoff_s=0.01), "judge": RoleConfig(endpoints=[ep], max_retries=1, backoff_s=0.01)}
    return TeacherPool(roles, RequestCache(tmp_path), "r1")


def _grader(req: dict) -> str:
    """A stand-in judge model: correct when the prediction line contains the reference."""
    msgs = req["messages"]
    if msgs[-1]["content"].startswith("Your reply could not be read"):
        return "<judge>False</judge>"
    text = msgs[1]["content"]
    if "Reference answer:" not in text:  # honesty prompt
        return "<judge>True</judge>" if "not enough" in text else "<judge>False</judge>"
    _, ref, pred = unfenced(text)
    return f"<judge>{ref.lower() in pred.lower()}</judge>"


def test_model_judge_over_http_and_verdicts_are_cached(tmp_path):
    async def go(pool):  # noqa: ANN001, ANN202
        async with pool:
            j = ModelJudge(pool)
            a = await j.judge("Who?", "Marie Curie", "It was Marie Curie, in 1903.")
            b = await j.judge("Who?", "Marie Curie", "Pierre")
            return a, b

    with OpenAIServer(reply=_grader) as srv:
        a, b = asyncio.run(go(_pool(srv.base_url, tmp_path)))
        assert (a.correct, a.score, a.method) == (True, 1.0, "model")
        assert (b.correct, b.score) == (False, 0.0)
        assert len(srv.requests) == 2
        body = srv.requests[0].body
        assert body["temperature"] == 0.0 and "<judge>True</judge>" in body["messages"][0]["content"]
        srv.clear()
        a2, b2 = asyncio.run(go(_pool(srv.base_url, tmp_path)))
        assert srv.requests == [] and (a2.correct, b2.correct) == (True, False)


def test_unreadable_verdict_gets_a_bounded_nudge():
    replies = ["hmm, hard to say", "<judge>True</judge>"]
    with OpenAIServer(reply=replies) as srv:
        import tempfile

        pool = _pool(srv.base_url, tempfile.mkdtemp())

        async def go():  # noqa: ANN202
            async with pool:
                return await ModelJudge(pool).judge("q", "42", "42")

        res = asyncio.run(go())
        assert res.correct and res.method == "model" and len(res.request_ids) == 2
        nudge = srv.requests[1].body["messages"]
        assert [m["role"] for m in nudge] == ["system", "user", "assistant", "user"]


def test_never_readable_is_an_error_unless_a_fallback_is_asked_for(tmp_path):
    with OpenAIServer(reply=["I refuse to use tags"]) as srv:
        pool = _pool(srv.base_url, tmp_path)

        async def go(fallback):  # noqa: ANN001, ANN202
            async with pool:
                return await ModelJudge(pool, max_attempts=3, fallback=fallback).judge("How many?", "12", "12", "Int")

        with pytest.raises(JudgeUnavailable, match="unreadable after 3 attempts"):
            asyncio.run(go(None))
        assert len(srv.requests) == 3
        pool = _pool(srv.base_url, tmp_path)
        res = asyncio.run(go(RuleJudge()))  # asked for explicitly: the rules answer, and the judgment says so
    assert res.method == "rules-fallback" and res.correct and "unreadable after 3 attempts" in res.reason


def test_unavailable_judge_is_an_error_not_a_wrong_verdict(tmp_path):
    with OpenAIServer(faults=Faults(p500=1.0)) as srv:
        pool = _pool(srv.base_url, tmp_path)

        async def go():  # noqa: ANN202
            async with pool:
                return await ModelJudge(pool).judge("How many?", "12", "13", "Int")

        with pytest.raises(JudgeUnavailable, match="model judge unavailable"):
            asyncio.run(go())
        assert len(srv.requests) == 2  # judge role: max_retries=1


def test_visor_gate_uses_honesty_when_retrieval_is_incomplete(tmp_path):
    async def go(pool):  # noqa: ANN001, ANN202
        async with pool:
            j = ModelJudge(pool)
            honest = await answer_reward(j, "q", "Paris", "The pages I found are not enough to answer.", retrieval_complete=False)
            bluff = await answer_reward(j, "q", "Paris", "Paris", retrieval_complete=False)
            full = await answer_reward(j, "q", "Paris", "Paris", retrieval_complete=True)
            return honest, bluff, full

    with OpenAIServer(reply=_grader) as srv:
        honest, bluff, full = asyncio.run(go(_pool(srv.base_url, tmp_path)))
    assert (honest.score, honest.method) == (HONESTY_SCORE, "honesty-model")
    assert bluff.score == 0.0  # a right-sounding answer without the evidence earns nothing
    assert (full.score, full.method) == (1.0, "model")


def test_rule_judge_offline():
    j = RuleJudge()
    run = asyncio.run
    assert run(j.judge("q", "3.5%", "3.5 %", "Float")).correct
    assert not run(j.judge("q", "12", "13", "Int")).correct
    assert not run(j.judge("q", "Paris", None)).correct
    assert run(j.honesty("q", "Not answerable")).score == HONESTY_SCORE
    assert run(j.honesty("q", "Paris")).score == 0.0


def test_make_judge_picks_rules_without_an_endpoint():
    assert isinstance(make_judge(None), RuleJudge)
