"""Bad model replies never reach training data as if they were good ones: real synthesis runs against the scripted
OpenAI-compatible server on 127.0.0.1.

- A reply cut at max_tokens (`finish_reason: "length"`) is an invalid turn with that reason, for every recipe's
  policy (here VRAG-RL and EVisRAG), also when it is replayed from the request cache.
- A response body with bytes that are not UTF-8, or a lone-surrogate escape, is decoded with U+FFFD: one invalid
  turn, no retry, the episode goes on, and the request cache holds valid text that replays the same way.
- A 1 MB reply is rejected once: no later request carries it, the request cache and the trajectory keep its start.
- The per-episode bound on request bytes (`synth.max_episode_request_bytes`) ends an episode with status "budget".
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.scripted_teacher import ANSWER, teacher, text_of
from tests.support.synth_workspace import sample_workspace
from vrag_data.config import RunConfig
from vrag_data.recipe import resolve_recipe
from vrag_data.schema.records import Trajectory
from vrag_data.synth.ledger import read_trajectories
from vrag_data.synth.run import RunResult, synth

SEED = 500  # sampling seed of every role: the server reads the sample index from seed - SEED
TRUNCATED = "truncated at max_tokens (finish_reason length)"
MB = 1 << 20


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def run(ws: Path, srv: OpenAIServer, recipe: str, run_id: str, *, samples: int = 1, **synth_opts: Any) -> RunResult:
    """One synth run of `recipe` on the first task, every role it uses answered by `srv`."""
    def role(name: str) -> dict:
        return {"endpoints": [{"base_url": srv.base_url, "model": "teacher"}], "max_retries": 2, "backoff_s": 0.01,
                "backoff_max_s": 0.02, "timeout_s": 30, "sampling": {"temperature": 0.0, "max_tokens": 512, "seed": SEED}}

    roles = resolve_recipe(recipe).role_names
    cfg = RunConfig.model_validate({"roles": {r: role(r) for r in roles}, "synth": synth_opts})
    return synth(ws, cfg, resolve_recipe(recipe, cfg), run_id=run_id, samples=samples, limit=1, progress=False)


def resume(ws: Path, srv: OpenAIServer, recipe: str, run_id: str, **kw: Any) -> list[Trajectory]:
    """Re-run after the trajectory shards were lost: every call must replay from the request cache."""
    shutil.rmtree(ws / "runs" / run_id / "trajectories")
    srv.clear()
    res = run(ws, srv, recipe, run_id, **kw)
    assert srv.requests == []
    return read_trajectories(Path(res.run_dir))


def policy_turns(req: dict[str, Any]) -> int:
    """The assistant turns a request carries (the scripted teacher's step number)."""
    return sum(1 for m in req["messages"] if m["role"] == "assistant")


def is_first_policy_call(req: dict[str, Any]) -> bool:
    msgs = req["messages"]
    system = text_of(msgs[0]) if msgs and msgs[0]["role"] == "system" else ""
    first = text_of(msgs[0]) if msgs else ""
    policy = "search engine over a collection" in system or "four steps" in first
    return policy and policy_turns(req) == 0


def payload(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "teacher",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def first_reply(make: Callable[[dict[str, Any], str], Any]) -> Callable[[dict[str, Any]], Any]:
    """The scripted teacher, except that the policy's first reply of an episode is `make(request, teacher's text)`."""
    def reply(req: dict[str, Any]) -> Any:
        text = teacher(req)
        return make(req, text) if is_first_policy_call(req) else text

    return reply


def bodies_text(srv: OpenAIServer) -> list[str]:
    """The policy requests that carry earlier turns (side requests, e.g. the grounding expert's, carry none)."""
    return [orjson.dumps(r.body).decode() for r in srv.requests if r.body is not None and policy_turns(r.body)]


# ---------------------------------------------------------------------------------------------- (a) max_tokens


@pytest.mark.parametrize("recipe", ["vrag_rl", "evisrag"])
def test_a_reply_cut_at_max_tokens_is_an_invalid_turn_also_from_the_cache(ws, recipe):
    # the first reply would parse (a well-formed search, or EVisRAG's full four-tag answer), but it was cut at max_tokens
    def cut(req: dict[str, Any], text: str) -> dict[str, Any]:
        if recipe == "vrag_rl":
            text = "<think>I should search.</think>\n<search>Zephyra net income 2020</search>"
        else:
            text = teacher({**req, "messages": [*req["messages"], {"role": "assistant", "content": "x"}]})
        return payload(text, "length")

    run_id = f"clean-length-{recipe}"
    with OpenAIServer(reply=first_reply(cut)) as srv:
        res = run(ws, srv, recipe, run_id)
        later = bodies_text(srv)
        (t,) = read_trajectories(Path(res.run_dir))
        first = t.turns[0]
        assert first.action.kind == "invalid" and TRUNCATED in first.action.reason
        assert t.n_invalid >= 1 and any(TRUNCATED in r for r in t.extra["invalid_reasons"])
        assert t.status != "error"
        assert first.observation is not None and TRUNCATED in first.observation.text  # the recipe's re-prompt follows
        assert len(t.turns) >= 2  # and the episode went on
        # later requests carry a placeholder, not the rejected reply
        assert later and all("[reply rejected: the reply was truncated" in b for b in later)
        # a resume replays the cut reply from the request cache: the same invalid turn
        (again,) = resume(ws, srv, recipe, run_id)
    assert again.turns[0].action == first.action and again.n_invalid == t.n_invalid
    assert [x.assistant for x in again.turns] == [x.assistant for x in t.turns]


# ---------------------------------------------------------------------------------------------- (b) undecodable


BAD_BODIES = {
    # raw bytes that are not UTF-8 inside the JSON string
    0: b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":'
       b'"<think>I should search \xff\xfe here.</think>\\n<search>Zephyra net income 2020</search>"},"finish_reason":"stop"}],'
       b'"usage":{"prompt_tokens":10,"completion_tokens":10}}',
    # a JSON escape of a lone surrogate (no UTF-8 encoding exists for it)
    1: b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":'
       b'"<think>I should search \\ud800 here.</think>\\n<search>Zephyra net income 2020</search>"},"finish_reason":"stop"}],'
       b'"usage":{"prompt_tokens":10,"completion_tokens":10}}',
}


def test_undecodable_bytes_are_one_invalid_turn_not_a_transport_fault(ws):
    def bad(req: dict[str, Any], text: str) -> bytes:
        return BAD_BODIES[int(req["seed"]) - SEED]

    run_id = "clean-undecodable"
    with OpenAIServer(reply=first_reply(bad)) as srv:
        res = run(ws, srv, "vrag_rl", run_id, samples=2)
        seen = srv.requests
        trajs = sorted(read_trajectories(Path(res.run_dir)), key=lambda t: t.sample)
        assert len(trajs) == 2
        for t in trajs:
            first = t.turns[0]
            assert t.status != "error", t.reason
            assert first.action.kind == "invalid" and "invalid UTF-8" in first.action.reason
            assert t.n_invalid == 1 and t.usage.retries == 0
            assert "\ufffd" in first.assistant and "search" in first.assistant
            first_id = first.request_ids[0]
            assert [r.request_id for r in seen].count(first_id) == 1  # not retried
        later = [b for b in bodies_text(srv) if "[reply rejected: undecodable bytes" in b]
        assert later  # later requests carry the placeholder
        # the request cache holds valid text: U+FFFD where the bytes could not be decoded
        db = Path(res.run_dir) / "requests.sqlite"
        with sqlite3.connect(db) as con:
            texts = [r[0] for r in con.execute("SELECT text FROM responses")]
            flagged = con.execute("SELECT count(*) FROM responses WHERE undecodable = 1").fetchone()[0]
        assert flagged == 2
        assert sum("\ufffd" in x for x in texts) == 2
        assert all(x.encode("utf-8") for x in texts)  # no lone surrogate: every text encodes
        again = sorted(resume(ws, srv, "vrag_rl", run_id, samples=2), key=lambda t: t.sample)
    for t, a in zip(trajs, again, strict=True):
        assert a.turns[0].action == t.turns[0].action and a.status == t.status and a.n_invalid == 1


# ---------------------------------------------------------------------------------------------- (c) 1 MB reply


def test_a_megabyte_reply_is_never_sent_again_nor_stored_whole(ws):
    huge = "<think>" + "x" * MB  # one runaway reply, then the scripted teacher's episode

    run_id = "clean-huge"
    with OpenAIServer(reply=first_reply(lambda req, text: huge)) as srv:
        res = run(ws, srv, "vrag_rl", run_id)
        seen = srv.requests
    sizes = [len(orjson.dumps(r.body)) for r in seen if r.body is not None]
    assert len(sizes) >= 3
    assert max(sizes[1:]) < 100_000, sizes  # no later request carries the megabyte (before: ~1 MB each)
    assert all("x" * 5_000 not in orjson.dumps(r.body).decode() for r in seen[1:] if r.body is not None)
    (t,) = read_trajectories(Path(res.run_dir))
    first = t.turns[0]
    assert first.action.kind == "invalid" and "too long" in first.action.reason and str(MB + 7) in first.action.reason
    assert len(first.assistant) < 5_000 and "runaway reply cut here" in first.assistant  # its start and a marker
    assert t.status == "answered" and t.final_answer == ANSWER
    assert t.extra["request_bytes"] < 200_000
    db = Path(res.run_dir) / "requests.sqlite"
    with sqlite3.connect(db) as con:
        chars, cut = con.execute("SELECT sum(length(text)), max(cut_from) FROM responses").fetchone()
    assert chars < 50_000 and cut == MB + 7
    size = sum(f.stat().st_size for f in db.parent.glob("requests.sqlite*"))
    assert size < 1 << 20, size


# ---------------------------------------------------------------------------------------------- (d) request bytes cap


def test_the_episode_request_bytes_cap_ends_the_episode_with_a_recorded_reason(ws):
    with OpenAIServer(reply=teacher) as srv:
        (free,) = read_trajectories(Path(run(ws, srv, "vrag_rl", "clean-uncapped").run_dir))
        assert free.status == "answered"
        cap = free.extra["request_bytes"] // 2  # the first requests fit, the episode's whole conversation does not
        srv.clear()
        res = run(ws, srv, "vrag_rl", "clean-cap", max_episode_request_bytes=cap)
        n_sent = len(srv.requests)
    (t,) = read_trajectories(Path(res.run_dir))
    assert t.status == "budget"
    assert "request bytes cap" in t.reason and "synth.max_episode_request_bytes" in t.reason and f"{cap:,}" in t.reason
    assert 0 < t.extra["request_bytes"] <= cap
    assert 1 <= n_sent == t.usage.requests < free.usage.requests  # the call that would pass the cap was never sent
