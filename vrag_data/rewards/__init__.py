"""Rewards (pure): answer scorers, retrieval / crop / format rewards, per-recipe specs, verl entry point."""

from vrag_data.rewards.answer import (
    anls,
    answer_correct,
    exact_match,
    is_unanswerable,
    normalize_answer,
    numeric_match,
    token_f1,
)
from vrag_data.rewards.crop import crop_reward, iou
from vrag_data.rewards.episode import Episode, Gold, episode_from_trajectory, gold_from_task
from vrag_data.rewards.recipes import RewardBreakdown, score_episode, score_trajectory
from vrag_data.rewards.registry import Reward, get_reward, known_rewards, register_reward
from vrag_data.rewards.retrieval import (
    interleave_by_rank,
    interleaved_ndcg,
    ndcg,
    read_page_recall,
    selection_reward,
    visor_retrieval_reward,
)

__all__ = [
    "Episode",
    "Gold",
    "Reward",
    "RewardBreakdown",
    "anls",
    "answer_correct",
    "crop_reward",
    "episode_from_trajectory",
    "exact_match",
    "get_reward",
    "gold_from_task",
    "interleave_by_rank",
    "interleaved_ndcg",
    "iou",
    "is_unanswerable",
    "known_rewards",
    "ndcg",
    "normalize_answer",
    "numeric_match",
    "read_page_recall",
    "register_reward",
    "score_episode",
    "score_trajectory",
    "selection_reward",
    "token_f1",
    "visor_retrieval_reward",
]
