"""VRAG-RL's trainer (its verl fork, 0.2.0.dev) entry point: `custom_reward_function.path=reward/vragrl_reward.py`,
`custom_reward_function.name=compute_score`, with the fork's `reward_model.reward_manager=rm`.

The fork's reward manager (`RMManager`, verl/workers/reward_manager/rm.py: the only one its main_ppo accepts) calls
`compute_score(data_source=, solution_str=, ground_truth=, extra_info=)` and compares the result with 0.0, so it must
be a float (verl >= 0.9's dict is a TypeError there). A rollout scoring above 0 is then graded by the fork's own
judge (`reward_model.rm_url`) and re-scored 0.7*judge + 0.1*score + 0.2*NDCG (NDCG of the pages the agent retrieved
against `extra_info` `file_name` / `reference_page`); at validation its score becomes the judge's verdict. Before
scoring, the fork's training loop replaces `extra_info` by {file_name, reference_page, question, answer}.

So `compute_score` returns the term rm.py does not compute itself, dispatching on `data_source` as the fork's own
scorer does: for its data sources (`rag`, `slidevqa_test`, `mmlongdoc`, `vidoseek`) that is VRAG-RL's format term,
1.0 when the rollout holds a complete <search> and <answer>, else 0.0 (the fork's default scorer returns the same
term): the fork's total is then VRAG-RL's reward, judged by the fork, whatever recipe wrote the row (the fork's
reward manager knows no other; training and validation score alike, though only validation rows keep their
`extra_info`). A one-turn answer over given pages (EVisRAG's rows: they never search, so they would never pass that
gate) gets EVisRAG's format term instead when the rollout has no <search>: the fork's judge then grades its answer
against the row's plain answer (`export --for vragrl` writes the plain answer as `ground_truth`, the judge's
reference). A ground truth in EVisRAG's tagged form (`<evidence>[i]: ...</evidence><answer>...</answer>`, exports
written before) gets EVisRAG's whole reward. A row with another `data_source` gets the whole score of the reward its
`extra_info.reward` names (`vrag_data.rewards.verl.compute_score`'s "score") as a float. `total_score` is the whole score of the row's own
reward as a float, for a reward manager that uses the float as the reward. Gold pages missing from `extra_info` are
read from the fork's `file_name` and `reference_page`. A whole reward refuses a row that lacks a key it reads
(`vrag_data.rewards.verl.MissingRewardKey`: the fork's training rows keep only file_name, reference_page, question and
answer, so only its own data sources and EVisRAG's tagged targets, which read no other key, score there).
"""

from __future__ import annotations

import re
from typing import Any

from vrag_data.rewards.format import last_tag
from vrag_data.rewards.registry import get_reward
from vrag_data.rewards.verl import DATA_SOURCE_RECIPE, split_turns
from vrag_data.rewards.verl import compute_score as _verl_score

FORK_DATA_SOURCES = tuple(DATA_SOURCE_RECIPE)  # rag, slidevqa_test, mmlongdoc, vidoseek
_USER_TURN = re.compile(r"<\|im_start\|>user.*?<\|im_end\|>", re.S)  # the fork drops observations the same way


def _listed(v: Any) -> list[Any]:
    """Lists as the fork hands them over: numpy arrays (from pandas), lists, or None."""
    if v is None:
        return []
    return list(v.tolist() if hasattr(v, "tolist") else v)


def fork_extra(extra_info: Any) -> dict[str, Any]:
    """`extra_info` with `gold_pages` filled from the fork's `file_name` ("<stem>.pdf") and `reference_page`."""
    extra = dict(extra_info or {})
    if not _listed(extra.get("gold_pages")) and extra.get("file_name"):
        stem = str(extra["file_name"]).split(".pdf")[0]
        extra["gold_pages"] = [f"{stem}_{int(p)}" for p in _listed(extra.get("reference_page"))]
    return extra


def reward_of(data_source: str, extra: dict[str, Any]) -> str:
    reward = extra.get("reward") or extra.get("recipe") or DATA_SOURCE_RECIPE.get(str(data_source))
    if not reward:
        raise ValueError(f"vragrl compute_score: data_source {data_source!r} is none of VRAG-RL's {list(FORK_DATA_SOURCES)} "
                         "and extra_info names no reward")
    return str(reward)


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **kwargs: Any) -> float:
    """The float the fork's RMManager expects (see the module docstring)."""
    if str(data_source) in FORK_DATA_SOURCES:
        gt = str(ground_truth)
        if "<evidence>" in gt and last_tag(gt, "answer") is not None:  # EVisRAG's one-turn target (older exports)
            extra = {**fork_extra(extra_info), "reward": "evisrag"}
            return float(_verl_score(data_source, solution_str, gt, extra, **kwargs)["score"])
        text = _USER_TURN.sub("", solution_str or "")
        score = float(get_reward("vrag_rl").format_score(split_turns(text)))
        if score or "<search>" in text:
            return score
        # a one-turn answer over given pages in EVisRAG's form (the fork's EVisRAG rows carry the plain answer as the
        # judge's reference): its format term, so the fork's judge grades the answer
        return float(get_reward("evisrag").format_score([text.split("<|im_end|>")[0]]))
    return total_score(data_source, solution_str, ground_truth, extra_info, **kwargs)


def total_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **kwargs: Any) -> float:
    """The row's whole reward as a float (judge settings as for `vrag_data.rewards.verl.compute_score`)."""
    extra = fork_extra(extra_info)
    extra.setdefault("reward", reward_of(data_source, extra))
    return float(_verl_score(data_source, solution_str, str(ground_truth), extra, **kwargs)["score"])
