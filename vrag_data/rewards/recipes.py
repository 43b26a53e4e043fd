"""Scoring an episode or a trajectory with a registered reward (`vrag_data.rewards.registry`; one module per reward
in `vrag_data.rewards.kinds`), its components computed separately, then combined with configurable weights.

| reward    | total                                                                        |
|-----------|------------------------------------------------------------------------------|
| vrag_rl   | 0.7*judge + 0.1*format + 0.2*ndcg when the format passes, else 0              |
| unidoc_rl | 0.6*judge + 0.1*ndcg(interleaved) + 0.1*select + 0.1*crop + 0.1*format        |
| visor     | (answer + retrieval) * (1 - I_format) - I_format; answer gated on completeness |
| evisrag   | mean of perception, derivation, format (RS-GRPO scope rewards in `extras`)    |
| mmdoc_r1  | read-page recall + correctness                                               |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vrag_data.rewards.episode import Episode, Gold, episode_from_trajectory, gold_from_task
from vrag_data.rewards.registry import RewardBreakdown, get_reward

if TYPE_CHECKING:  # the records are pydantic: the reward entry points import none of it
    from vrag_data.schema.records import Task, Trajectory

__all__ = ["RewardBreakdown", "resolve_weights", "row_keys", "score_episode", "score_trajectory"]


def resolve_weights(reward: str, weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """The reward's default weights with `weights` overriding some; an unknown component is one line."""
    return get_reward(reward).resolve_weights(weights)


def row_keys(reward: str) -> tuple[str, ...]:
    """The row keys the reward reads (its components' `COMPONENT_ROW_KEYS`), in a stable order."""
    return get_reward(reward).row_keys()


def score_episode(
    ep: Episode,
    gold: Gold,
    recipe: str,
    judge_score: float | None = None,
    weights: Mapping[str, float] | None = None,
    params: Mapping[str, float] | None = None,
    honesty_score: float | None = None,
) -> RewardBreakdown:
    """All components of the reward named `recipe` for one episode. `judge_score` is the model judge's verdict in
    [0, 1]; without it the rule scorer (`answer_correct`) stands in. `honesty_score` is VISOR's honesty judge in
    {0, 0.2} when retrieval is incomplete; without it a declining answer earns the credit."""
    reward = get_reward(recipe)
    return reward.score(ep, gold, reward.resolve_weights(weights), reward.resolve_params(params), judge_score,
                        honesty_score)


def score_trajectory(
    traj: Trajectory,
    task: Task,
    recipe: str | None = None,
    judge_score: float | None = None,
    weights: Mapping[str, float] | None = None,
    params: Mapping[str, float] | None = None,
    honesty_score: float | None = None,
) -> RewardBreakdown:
    """Reward breakdown of a synthesized trajectory (the reward defaults to the one named like its recipe)."""
    return score_episode(
        episode_from_trajectory(traj),
        gold_from_task(task, traj),
        recipe or traj.recipe,
        judge_score=judge_score,
        weights=weights,
        params=params,
        honesty_score=honesty_score,
    )
