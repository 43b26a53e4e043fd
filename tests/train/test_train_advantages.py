"""Advantage estimators, the clipped loss and token scopes against hand-computed values."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.train.advantages import grpo, rs_grpo, spo, spo_baselines
from vrag_data.train.embed import HashedBowEmbedder, load_embedder
from vrag_data.train.loss import policy_loss, token_logprobs
from vrag_data.train.rollout import char_scopes


def approx(xs, ys, tol=1e-4):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        assert x == pytest.approx(y, abs=tol)


def test_grpo_hand_values():
    # [1, 2, 3]: mean 2, sample std sqrt((1 + 0 + 1) / 2) = 1
    approx(grpo([1, 2, 3]), [-1, 0, 1])
    # [1, 0, 0, 1]: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.5 / 0.57735 = +-0.86603
    approx(grpo([1, 0, 0, 1]), [0.86603, -0.86603, -0.86603, 0.86603])
    approx(grpo([0.2, 0.4], scale_std=False), [-0.1, 0.1])
    assert grpo([0.7]) == [0.0]  # a group of one carries no signal
    assert grpo([0.5, 0.5, 0.5]) == [0.0, 0.0, 0.0]
    assert grpo([]) == []


def test_rs_grpo_scope_mode_is_eq_8_9():
    comps = {"perception": [1, 0, 0.5], "derivation": [0, 1, 1], "format": [1, 1, 0]}
    scopes = {"observe": ["perception", "format"], "answer": ["derivation", "format"], "other": ["format"]}
    out = rs_grpo(comps, scopes, mode="scope")
    # observe: scope rewards (1+1)/2=1, (0+1)/2=0.5, (0.5+0)/2=0.25; mean 0.58333;
    # deviations .41667 -.08333 -.33333; sample var (.173611+.006944+.111111)/2=.145833; std .381881
    approx(out["observe"], [0.41667 / 0.381881, -0.08333 / 0.381881, -0.33333 / 0.381881])
    # answer: (0+1)/2=.5, (1+1)/2=1, (1+0)/2=.5 -> mean 2/3, deviations -1/6 1/3 -1/6, var (1/36+1/9+1/36)/2=1/12
    s = math.sqrt(1 / 12)
    approx(out["answer"], [-1 / 6 / s, 1 / 3 / s, -1 / 6 / s])
    # other = format alone: mean 2/3, deviations 1/3 1/3 -2/3, var (1/9+1/9+4/9)/2 = 1/3
    s = math.sqrt(1 / 3)
    approx(out["other"], [1 / 3 / s, 1 / 3 / s, -2 / 3 / s])


def test_rs_grpo_component_mode_normalises_each_reward_first():
    comps = {"perception": [1, 0, 0.5], "format": [1, 1, 0]}
    out = rs_grpo(comps, {"observe": ["perception", "format"]}, mode="component")
    # perception -> [1, -1, 0] (mean .5, std .5); format -> [.57735, .57735, -1.1547]
    approx(out["observe"], [(1 + 0.57735) / 2, (-1 + 0.57735) / 2, (0 - 1.1547) / 2])


def test_rs_grpo_rejects_unknown_component_and_ragged_groups():
    with pytest.raises(KeyError, match="perception"):
        rs_grpo({"judge": [1, 0]}, {"observe": ["perception"]})
    with pytest.raises(ValueError, match="group sizes"):
        rs_grpo({"a": [1, 0], "b": [1]}, {"x": ["a"]})
    with pytest.raises(ValueError, match="mode"):
        rs_grpo({"a": [1, 0]}, {"x": ["a"]}, mode="token")


def test_recipe_reward_scopes_name_real_reward_components():
    from vrag_data.recipe import all_recipes
    from vrag_data.rewards.registry import get_reward

    from tests.support.shipped import SHIPPED

    for name, recipe in all_recipes().items():
        if name not in SHIPPED:  # a sixth recipe's reward weights live with its reward
            continue
        used = {c for names in recipe.reward.scopes.values() for c in names}
        assert used and used <= set(get_reward(recipe.reward.name).weights), name


def test_spo_similarity_weighted_baseline_hand_values():
    rewards = [1.0, 0.0, 1.0]
    emb = [[1, 0], [0, 1], [1, 1]]  # cos(1,2)=0, cos(1,3)=cos(2,3)=1/sqrt2
    r2 = 1 / math.sqrt(2)
    # baseline_1 = (1*1 + 0*0 + r2*1) / (1 + 0 + r2) = 1
    # baseline_2 = (0*1 + 1*0 + r2*1) / (0 + 1 + r2) = r2 / (1 + r2) = 0.41421
    # baseline_3 = (r2*1 + r2*0 + 1*1) / (r2 + r2 + 1) = 0.70711
    approx(spo_baselines(rewards, emb), [1.0, r2 / (1 + r2), (r2 + 1) / (2 * r2 + 1)])
    approx(spo(rewards, emb), [0.0, -r2 / (1 + r2), 1 - (r2 + 1) / (2 * r2 + 1)])


def test_spo_equal_embeddings_is_mean_baseline_and_negative_cosine_is_ignored():
    rewards = [1.0, 0.0, 0.5]
    approx(spo(rewards, [[1, 2]] * 3), [0.5, -0.5, 0.0])  # identical trajectories: plain GRPO mean baseline
    # opposite embeddings share nothing: each trajectory is its own baseline
    approx(spo([1.0, 0.0], [[1, 0], [-1, 0]]), [0.0, 0.0])
    approx(spo([1.0, 0.0], [[0, 0], [0, 0]]), [0.5, -0.5])  # empty embeddings fall back to the mean


def test_hashed_bow_embedder():
    e = HashedBowEmbedder(dim=64)
    a, b, c = e.embed(["search revenue table", "Search REVENUE table", "zebra"])
    assert a == b  # case-insensitive, deterministic
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert sum(x * y for x, y in zip(a, c)) < 0.99
    assert e.embed([""])[0] == [0.0] * 64
    assert isinstance(load_embedder("hashed-bow"), HashedBowEmbedder)
    with pytest.raises(ValueError):
        load_embedder("no-colon")


def test_policy_loss_dapo_clip_and_kl_hand_values():
    logp = torch.log(torch.tensor([[1.5, 0.5, 0.5, 3.0]]))
    old = torch.zeros_like(logp)
    adv = torch.tensor([[1.0, 1.0, -1.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 0]])  # the last token is an observation token: no effect whatever its value
    loss, st = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    # token 1: ratio 1.5, A=+1 -> min(1.5, 1.28) = 1.28 (clipped high)
    # token 2: ratio 0.5, A=+1 -> min(0.5, 0.8) = 0.5
    # token 3: ratio 0.5, A=-1 -> min(-0.5, -0.8) = -0.8 (clipped low)
    assert float(loss) == pytest.approx(-(1.28 + 0.5 - 0.8) / 3, abs=1e-6)
    assert st.clip_frac == pytest.approx(2 / 3)
    assert st.tokens == 3
    # KL (k3): ref - logp = log 2 -> 2 - log 2 - 1 = 0.306853 on every token
    same = torch.zeros((1, 2))
    loss, st = policy_loss(same, same, torch.zeros((1, 2)), torch.ones((1, 2)), 0.2, 0.28,
                           ref_logp=same + math.log(2), kl_coef=0.1)
    assert st.kl == pytest.approx(2 - math.log(2) - 1, abs=1e-6)
    assert float(loss) == pytest.approx(0.1 * (2 - math.log(2) - 1), abs=1e-6)


def test_token_logprobs_alignment():
    logits = torch.zeros((1, 3, 4))
    logits[0, 0, 2] = 10.0  # position 0 predicts token 2 strongly
    lp = token_logprobs(logits, torch.tensor([[1, 2, 3]]))
    assert lp[0, 0] == 0.0
    assert lp[0, 1] > -0.01  # token at position 1 (=2) was predicted by position 0
    assert lp[0, 2] == pytest.approx(math.log(0.25))


def test_char_scopes():
    text = "<think>ab</think>x<answer>y</answer><search>q"
    sc = char_scopes(text, ["think", "answer", "search"])
    assert "".join(s[0] for s in sc) == "t" * 17 + "o" + "a" * 18 + "s" * 9
