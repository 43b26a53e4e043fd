"""Advantage estimators for group rollouts (pure functions, no I/O, no torch).

All three work on one group: the G trajectories sampled for the same task.

- `grpo`: A_i = (R_i - mean(R)) / (std(R) + eps), std with Bessel's correction as verl and TRL compute it;
  `scale_std=False` keeps only the mean-centring (MM-Doc-R1 eq. 2 writes GRPO that way).
- `rs_grpo` (EVisRAG, RS-GRPO): reward components are bound to token scopes. With mode="scope" (the paper,
  eqs. 8-9) a scope's reward is the mean of its in-scope components and that scope reward is normalised across
  the group; with mode="component" each component is normalised across the group first and the scope's
  advantage is the mean of its normalised components. Either way a token only sees the rewards of its scope.
- `spo` (MM-Doc-R1, SPO): baseline_i = sum_j w_ij R_j with w_ij = sim(e_i, e_j) / sum_k sim(e_i, e_k),
  cosine similarity of trajectory embeddings (k and j run over the whole group, i itself included);
  A_i = R_i - baseline_i. Negative similarities are clipped to 0 so the weights stay a convex combination.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

EPS = 1e-6

def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def grpo(rewards: Sequence[float], scale_std: bool = True, eps: float = EPS) -> list[float]:
    """Group-relative advantage of each trajectory. A group of one (or all equal rewards) gives zeros."""
    if not rewards:
        return []
    m = _mean(rewards)
    centred = [r - m for r in rewards]
    if not scale_std:
        return centred
    s = _std(rewards)
    return [c / (s + eps) for c in centred]


def rs_grpo(
    components: Mapping[str, Sequence[float]],
    scopes: Mapping[str, Sequence[str]],
    mode: str = "scope",
    scale_std: bool = True,
    eps: float = EPS,
) -> dict[str, list[float]]:
    """Per-scope advantages: {scope: [A_1..A_G]}.

    components: {component name: rewards of the G trajectories}; scopes: {scope: component names}.
    A scope naming a component that is absent fails loudly: a silent zero would hide a reward-spec mismatch.
    """
    sizes = {len(v) for v in components.values()}
    if len(sizes) > 1:
        raise ValueError(f"reward components have different group sizes: {sorted(sizes)}")
    g = sizes.pop() if sizes else 0
    out: dict[str, list[float]] = {}
    normalised: dict[str, list[float]] = {}
    for scope, names in scopes.items():
        missing = [n for n in names if n not in components]
        if missing:
            raise KeyError(f"scope {scope!r} uses reward component(s) {missing} not in {sorted(components)}")
        if not names:
            out[scope] = [0.0] * g
            continue
        if mode == "scope":
            scope_reward = [_mean([components[n][i] for n in names]) for i in range(g)]
            out[scope] = grpo(scope_reward, scale_std, eps)
        elif mode == "component":
            for n in names:
                if n not in normalised:
                    normalised[n] = grpo(components[n], scale_std, eps)
            out[scope] = [_mean([normalised[n][i] for n in names]) for i in range(g)]
        else:
            raise ValueError(f"unknown rs_grpo mode {mode!r}; use 'scope' or 'component'")
    return out


def cosine_matrix(embeddings: Sequence[Sequence[float]]) -> list[list[float]]:
    norms = [math.sqrt(sum(x * x for x in e)) for e in embeddings]
    n = len(embeddings)
    sim = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if norms[i] > 0 and norms[j] > 0:
                dot = sum(a * b for a, b in zip(embeddings[i], embeddings[j], strict=True))
                sim[i][j] = dot / (norms[i] * norms[j])
    return sim


def spo_baselines(rewards: Sequence[float], embeddings: Sequence[Sequence[float]]) -> list[float]:
    if len(rewards) != len(embeddings):
        raise ValueError(f"{len(rewards)} rewards for {len(embeddings)} embeddings")
    sim = cosine_matrix(embeddings)
    baselines = []
    for i in range(len(rewards)):
        w = [max(s, 0.0) for s in sim[i]]
        total = sum(w)
        if total <= 0:  # an empty trajectory: nothing is similar, fall back to the plain group mean
            baselines.append(_mean(rewards))
        else:
            baselines.append(sum(wj * rj for wj, rj in zip(w, rewards, strict=True)) / total)
    return baselines


def spo(rewards: Sequence[float], embeddings: Sequence[Sequence[float]], scale_std: bool = False,
        eps: float = EPS) -> list[float]:
    """Similarity-weighted baseline; `scale_std` optionally divides by the group std like GRPO."""
    if not rewards:
        return []
    adv = [r - b for r, b in zip(rewards, spo_baselines(rewards, embeddings), strict=True)]
    if scale_std:
        s = _std(rewards)
        adv = [a / (s + eps) for a in adv]
    return adv
