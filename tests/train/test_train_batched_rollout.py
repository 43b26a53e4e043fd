"""Batched rollouts: concurrent episodes, one generate call per decoding round, and exactly the tokens (contexts,
responses, masks, scopes, old log-probs) that one-at-a-time rollouts give at temperature 0."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from tests.support.train_workspace import build_workspace
from vrag_data.errors import VragError
from vrag_data.recipe import get_recipe
from vrag_data.schema.records import ImageRef, Message
from vrag_data.train.config import ModelConfig, TinyModelConfig
from vrag_data.train.engines import GenRequest, HfEngine, make_engine
from vrag_data.train.episode import PolicyResponder, make_deps, rollout_step
from vrag_data.train.model import load_policy
from vrag_data.train.rl_env import RlEnvironment
from vrag_data.train.rollout import PolicySampler, RoundBatcher, token_scopes
from vrag_data.train.update import _batch, _logp, training_rows


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    ws, tasks = build_workspace(tmp_path_factory.mktemp("batched") / "ws", size=(84, 56))
    return RlEnvironment.open(str(ws.root), None)


@pytest.fixture(scope="module")
def policy(env):
    return load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                       [f"{t.question} {t.answer}" for t in env.tasks])


def test_round_batcher_makes_one_call_per_round():
    seen: list[list[int]] = []

    def generate(reqs):  # the engine: echoes each prompt's first id, records the batch
        seen.append([r.prompt_ids[0] for r in reqs])
        return [[r.prompt_ids[0] * 10] for r in reqs]

    batcher = RoundBatcher(generate, max_wait_s=5.0)  # the flush must come from the count, not the timer

    async def episode(tag: int, turns: int) -> list[list[int]]:
        async with batcher.episode():
            return [await batcher.submit(GenRequest([tag + t])) for t in range(turns)]

    async def main():
        return await asyncio.gather(episode(100, 3), episode(200, 3), episode(300, 1))

    out = asyncio.run(main())
    assert out == [[[1000], [1010], [1020]], [[2000], [2010], [2020]], [[3000]]]
    # round 1: all three; then episode 300 is done and rounds 2-3 hold the other two
    assert batcher.rounds == [3, 2, 2] and seen == [[100, 200, 300], [101, 201], [102, 202]]


def test_left_padded_batch_generates_what_one_at_a_time_does(policy, env):
    sampler = PolicySampler(policy, env.image_loader(56 * 56, 84 * 84), 12, 0.0, 1.0)
    page = [ImageRef(page_id="acme_report_2")]
    reqs = [sampler.request([Message(role="user", text=text, images=imgs)]) for text, imgs in (
        ("What was Acme revenue in 2021?", page),
        ("Globex?", []),
        ("Search the workforce page of the Acme annual report and answer how many people it employed.", page),
    )]
    assert len({len(r.prompt_ids) for r in reqs}) == 3  # different lengths: the batch is left-padded
    engine = HfEngine(policy, 12, 0.0, 1.0)
    alone = [engine.generate([r])[0] for r in reqs]
    assert engine.calls == 3
    assert engine.generate(reqs) == alone and engine.calls == 4
    assert all(1 <= len(a) <= 12 for a in alone)


def _rollouts(policy, env, concurrent: bool):
    recipe = get_recipe("vrag_rl").for_rl(2, 84 * 84, "qwen2.5-vl")
    engine = HfEngine(policy, 12, 0.0, 1.0, max_batch_size=64 if concurrent else 1)
    sampler = PolicySampler(policy, env.image_loader(recipe.env.page_min_pixels, recipe.env.page_max_pixels,
                                                     recipe.env.page_resize), 12, 0.0, 1.0,
                            "You are a helpful assistant.", max_context=1024, engine=engine)
    responder = PolicyResponder(sampler, concurrent=concurrent)
    deps = make_deps(env, recipe, responder, "rl-test")
    episodes = rollout_step(deps, responder, [(env.tasks[0], 0), (env.tasks[2], 2)], 2)
    return episodes, engine.calls


@pytest.mark.slow
def test_batched_rollouts_match_sequential_token_for_token(policy, env):
    seq, seq_calls = _rollouts(policy, env, concurrent=False)
    bat, bat_calls = _rollouts(policy, env, concurrent=True)
    assert len(seq) == len(bat) == 4
    n_turns = sum(len(ep.samples) for ep in seq)
    assert seq_calls == n_turns and bat_calls < seq_calls  # one call per decoding round
    for a, b in zip(seq, bat, strict=True):
        assert a.trajectory.task_id == b.trajectory.task_id and a.trajectory.sample == b.trajectory.sample
        assert [t.assistant for t in a.trajectory.turns] == [t.assistant for t in b.trajectory.turns]
        assert a.trajectory.status == b.trajectory.status
        assert len(a.samples) == len(b.samples) >= 1
        for x, y in zip(a.samples, b.samples, strict=True):
            assert x.context_ids == y.context_ids and x.response_ids == y.response_ids
            assert (x.pixel_values is None) == (y.pixel_values is None)
            if x.pixel_values is not None:
                assert torch.equal(x.pixel_values, y.pixel_values) and torch.equal(x.image_grid_thw, y.image_grid_thw)
            names = ["think", "search", "answer", "bbox"]
            assert token_scopes(policy.tokenizer, x.response_ids, names) == token_scopes(policy.tokenizer, y.response_ids, names)
    # the loss sees the same rows (ids, masks, advantages) and the same old log-probs
    advs = [[[0.5] * len(s.response_ids) for s in ep.samples] for ep in seq]
    rs, rb = training_rows(seq, advs), training_rows(bat, advs)
    assert [(r["ids"], r["mask"], r["adv"]) for r in rs] == [(r["ids"], r["mask"], r["adv"]) for r in rb]
    with torch.no_grad():
        old_s, old_b = _logp(policy.model, _batch(rs, policy, "cpu")), _logp(policy.model, _batch(rb, policy, "cpu"))
    assert torch.equal(old_s, old_b)


def test_vllm_engine_is_named_never_swapped(policy):
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(VragError, match="rl.rollout.engine: vllm is not installed"):
            make_engine("vllm", policy, max_new_tokens=8, temperature=0.0, top_p=1.0, max_batch_size=4)
    else:  # pragma: no cover - only where vLLM is installed (a GPU machine)
        pytest.skip("vLLM is installed: the engine itself is exercised by bench/bench_train_gpu.py")
