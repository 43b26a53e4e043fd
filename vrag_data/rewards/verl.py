"""verl entry point: point `custom_reward_function.path` at this file and `.name` at `compute_score`.

verl calls `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)` once per
rollout (plus any `custom_reward_function.reward_kwargs`). Returning a dict is allowed: verl uses
`["score"]` as the reward and logs the other keys, which must be the same for every sample of a run -
they are, per recipe.

Contract with the exporter (vrag_data.export, verl parquet rows):
- `reward_model.ground_truth`: the gold answer string. For EVisRAG it may instead be the tagged target
  `<evidence>[1]: ...\n[2]: no relevant information</evidence><answer>...</answer>`; the answer and the
  per-image gold evidence are then read from the tags.
- `extra_info` written by the exporter: `question`, `answer_format` (Int/Float/Str/List/None or null),
  `gold_pages` (page ids `<stem>_<page>`), `gold_boxes` ({page_id: [[x1, y1, x2, y2] in 0-1000, ...]}),
  `recipe`, `reward` (the reward to score with), `task_id` (the parquet writer stores `gold_boxes` as a JSON string; both forms are read); optional `sufficient` (EVisRAG label) and `shown_pages` (EVisRAG images in order).
- `extra_info` keys of the rollout: `search_results` (one list of page ids per search, rank order), `selections`
  ([{"candidates": [...], "selected": [...]}]) and `read_pages`, written empty by the exporter and filled by the agent
  loop (`vrag_data.train.verl_loop`'s extra_fields, merged into `extra_info`); optional: `retrieved_pages` (order
  first shown), `crops` ([{"page_id": ..., "box": [0-1000 x4]}]), `judge_score` (a model judge's 0/1 computed
  upstream), `assistant_turns` (the assistant messages in order) and `final_answer` (null = none), which the decoded
  stream cannot tell apart from observation text.
A row that lacks a key its reward reads (`Reward.row_keys` of `vrag_data.rewards.registry`: the keys of the reward's components;
a pixel `coord_space` adds `max_pixels` and `page_sizes` when boxes are read from the text) is refused with one line
(`MissingRewardKey`) naming the key and what writes it; present but empty is valid (`search_results: []`: no search
was recorded). Without `retrieved_pages` the retrieved pages are the recorded searches' pages, else the page ids of
gold documents the rollout mentions; without `crops` the <bbox> boxes of the text (read in `coord_space`) count,
on the last retrieved page. When neither `retrieved_pages`, a recorded search nor the text tells which pages the
agent saw (an exported row scored without the agent loop: its lists are empty), VISOR's honesty gate is not applied
(the answer is judged against the reference) and the score dict says so: `retrieval_known` 0.0.
The answer reward of the judged recipes (VRAG-RL, UniDoc-RL, VISOR with its honesty gate, MM-Doc-R1) comes from
`judge_score` when the rollout supplies it, else from the judge endpoint configured by `VRAG_JUDGE_URL` /
`VRAG_JUDGE_MODEL` (see `vrag_data.rewards.judge_client`), else from the rule scorers only when
`VRAG_REWARD_JUDGE=rules` (or the reward kwarg `judge: rules`) says so; otherwise it raises one line.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vrag_data.inert import strip_end_markers
from vrag_data.rewards.episode import Episode, Gold
from vrag_data.rewards.format import action_sequence, last_tag, parse_evidence, tag_contents
from vrag_data.rewards.answer import INSUFFICIENT, normalize_answer
from vrag_data.rewards.judge_client import judge_scores, judge_setting
from vrag_data.rewards.recipes import score_episode
from vrag_data.rewards.registry import get_reward, known_rewards
from vrag_data.rewards.retrieval import retrieval_complete
from vrag_data.rewards.retrieval import dedup

# VRAG-RL's trainer dispatches on these data sources; all of them use its reward.
DATA_SOURCE_RECIPE = {"rag": "vrag_rl", "slidevqa_test": "vrag_rl", "mmlongdoc": "vrag_rl", "vidoseek": "vrag_rl"}
# coordinate spaces whose boxes are 0-1000 of the page already (the gold boxes' space); the others are pixels
NORM_SPACES = ("qwen3-vl", "norm1000")
# keys the rollout fills (the agent loop's extra_fields); the exporter writes them empty
ROLLOUT_KEYS = ("search_results", "selections", "read_pages")
_TURN_END = re.compile(r"(</(?:search|select|bbox|crop|read|answer)>)")


class MissingRewardKey(ValueError):
    """A row lacks a key its reward reads: refused (one line naming the key and what writes it), never defaulted."""


def needed_keys(recipe: str, extra: dict[str, Any]) -> tuple[str, ...]:
    """The row keys reward `recipe` reads from `extra`: its components' (`row_keys`), plus what converting the
    text's <bbox> boxes from a pixel `coord_space` needs when the row has no `crops` of its own."""
    keys = get_reward(recipe).row_keys()
    space = extra.get("coord_space")
    if "coord_space" in keys and space is not None and str(space) not in NORM_SPACES and extra.get("crops") is None:
        keys += ("max_pixels", "page_sizes")
    return keys


def _writer(key: str, fmt: str) -> str:
    """Who writes `key` into a row of format `fmt`."""
    if key in ROLLOUT_KEYS:
        return (f"written empty by `vrag-data export --format {fmt}`, filled at rollout time by the agent loop's "
                "extra_fields (vrag_data.train.verl_loop); re-export the run or pass it from the rollout")
    return f"written by `vrag-data export --format {fmt}`; re-export the run"


def check_row_keys(recipe: str, extra: dict[str, Any], row: str, fmt: str = "verl") -> None:
    """MissingRewardKey (one line) when `extra` lacks a key reward `recipe` reads; None counts as absent, an empty
    value is present."""
    missing = [k for k in needed_keys(recipe, extra) if extra.get(k) is None]
    if missing:
        more = f"; also lacks {', '.join(repr(k) for k in missing[1:])}" if missing[1:] else ""
        raise MissingRewardKey(f"{fmt} row {row}: extra_info lacks {missing[0]!r} ({_writer(missing[0], fmt)}){more}; "
                               f"reward {recipe!r} reads it")


def split_turns(solution_str: str) -> list[str]:
    """Assistant turns of a multi-turn rollout string: chat-template markers when present, else one turn
    per action tag (observation text between turns is attached to the next turn and carries no actions)."""
    if "<|im_start|>assistant" in solution_str:
        parts = solution_str.split("<|im_start|>assistant")
        head = parts[0].strip()
        turns = [p.split("<|im_end|>")[0] for p in parts[1:]]
        return ([head] if head and action_sequence(head) else []) + turns
    pieces = _TURN_END.split(solution_str)
    turns = ["".join(pieces[i : i + 2]) for i in range(0, len(pieces) - 1, 2)]
    tail = pieces[-1] if len(pieces) % 2 == 1 else ""
    if tail.strip():
        turns.append(tail)  # a truncated last turn still counts against the format
    return turns or [solution_str]


def _box(text: str) -> list[float] | None:
    try:
        val = json.loads(text)
    except (ValueError, TypeError):
        nums = re.findall(r"-?\d+(?:\.\d+)?", text)
        val = [float(n) for n in nums]
    if isinstance(val, dict):
        val = val.get("bbox_2d") or val.get("bbox") or []
    if isinstance(val, list) and len(val) == 1 and isinstance(val[0], list):
        val = val[0]
    if isinstance(val, list) and len(val) == 4 and all(isinstance(v, (int, float)) for v in val):
        return [float(v) for v in val]
    return None


def _mentioned_pages(text: str, gold_pages: list[str]) -> list[str]:
    stems = sorted({p.rpartition("_")[0] for p in gold_pages if "_" in p}, key=len, reverse=True)
    if not stems:
        return []
    pat = re.compile(r"(?<![\w-])(" + "|".join(re.escape(s) for s in stems) + r")_(\d+)(?![\d])")
    return dedup(f"{m.group(1)}_{m.group(2)}" for m in pat.finditer(text))


def _as_list(v: Any) -> list[Any]:
    """Parquet readers hand lists back as numpy arrays (whose truth value is an error) or as None."""
    return [] if v is None else list(v)


def _boxes_of(v: Any) -> dict[str, list[list[float]]]:
    """`gold_boxes` as written by the exporter: a JSON string (parquet / datasets) or a mapping."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return {}
    if isinstance(v, str):
        v = json.loads(v)
    return {str(k): [[float(x) for x in b] for b in _as_list(bs)] for k, bs in dict(v).items()}


def _to_norm(box: list[float], page: str, extra: dict[str, Any]) -> list[float]:
    """A <bbox> the policy wrote in the row's `coord_space` -> 0-1000 of the page (the gold boxes' space). Pixel
    spaces need the page's size (`page_sizes`) and the row's `max_pixels`; 0-1000 spaces pass through."""
    space = str(extra["coord_space"])
    if space in NORM_SPACES:
        return box
    sizes = extra.get("page_sizes") or {}
    if isinstance(sizes, str):
        sizes = json.loads(sizes or "{}")
    wh, max_pixels = sizes.get(page), int(extra.get("max_pixels") or 0)
    if not wh or not max_pixels:
        return box  # the row lacks what converting needs (a page without an image): read as written
    from vrag_data.env.geometry import family_to_raw

    w, h = int(wh[0]), int(wh[1])
    x1, y1, x2, y2 = family_to_raw(box, w, h, space, max_pixels)
    return [x1 * 1000 / w, y1 * 1000 / h, x2 * 1000 / w, y2 * 1000 / h]


def episode_from_solution(solution_str: str, extra: dict[str, Any]) -> Episode:
    turns = extra.get("assistant_turns")  # an agent loop's own record beats splitting the decoded stream
    texts = [str(t) for t in _as_list(turns)] if turns is not None else split_turns(solution_str)
    answer = extra["final_answer"] if "final_answer" in extra else last_tag(solution_str, "answer")
    ep = Episode(texts=texts, final_answer=answer)
    gold_pages = [str(p) for p in _as_list(extra.get("gold_pages"))]
    if extra.get("search_results") is not None:
        ep.search_results = [[str(p) for p in _as_list(r)] for r in _as_list(extra["search_results"])]
    retrieved = extra.get("retrieved_pages")
    retrieved = None if retrieved is None else [str(p) for p in _as_list(retrieved)]
    # which pages the agent saw is known from the agent loop's own record or a recorded search; an exported row's
    # empty lists (no rollout has filled them: EasyR1, verl without the agent loop) leave it to the text
    known = retrieved is not None or bool(ep.search_results)
    if retrieved is None:
        retrieved = [p for r in ep.search_results for p in r] or _mentioned_pages(solution_str, gold_pages)
    ep.retrieval_known = known or bool(retrieved)
    ep.retrieved = dedup(retrieved)
    if not ep.search_results and ep.retrieved:
        # One search per <search> action; pages cannot be attributed to searches from text alone, so the
        # whole sequence counts as the result of the first search.
        n_search = sum(1 for t in texts for tag, _ in action_sequence(t) if tag == "search")
        ep.search_results = [ep.retrieved] + [[] for _ in range(max(0, n_search - 1))]
    ep.selections = [
        (_as_list(s.get("candidates")), _as_list(s.get("selected"))) for s in _as_list(extra.get("selections"))
    ]
    if extra.get("crops") is not None:
        ep.crops = [(str(c["page_id"]), [float(v) for v in c["box"]]) for c in _as_list(extra["crops"])]
    elif ep.retrieved and extra.get("coord_space") is not None:  # a reward that scores crops requires the space
        page = ep.retrieved[-1]
        ep.crops = [(page, _to_norm(b, page, extra)) for b in (_box(x) for x in tag_contents(solution_str, "bbox")) if b is not None]
    ep.read_pages = [str(p) for p in _as_list(extra.get("read_pages"))]
    ep.shown_pages = [str(p) for p in _as_list(extra.get("shown_pages"))] or list(ep.retrieved)
    block = tag_contents(texts[-1], "evidence") if texts else []
    ep.evidence = parse_evidence(block[-1]) if block else {}
    return ep


def gold_from_verl(ground_truth: str, extra: dict[str, Any]) -> Gold:
    answer, evidence, sufficient = ground_truth, None, extra.get("sufficient")
    tagged = last_tag(ground_truth, "answer")
    if tagged is not None:
        answer = tagged
        block = tag_contents(ground_truth, "evidence")
        evidence = parse_evidence(block[-1]) if block else None
        if sufficient is None:  # a row without its label (the fork keeps no extra_info): the tagged target tells it
            sufficient = normalize_answer(tagged) != normalize_answer(INSUFFICIENT)
    return Gold(
        answer=answer,
        answer_format=extra.get("answer_format") or None,
        question=str(extra.get("question") or ""),
        pages=[str(p) for p in _as_list(extra.get("gold_pages"))],
        boxes=_boxes_of(extra.get("gold_boxes")),
        evidence=evidence,
        sufficient=sufficient,
    )


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one rollout; returns {"score": total, <component>: value, ...} (see the module docstring).

    `kwargs` may carry `weights` / `params` overrides from `custom_reward_function.reward_kwargs`.
    """
    return score_row(data_source, solution_str, ground_truth, extra_info, "verl", **kwargs)


def score_row(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None,
    fmt: str,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` of a row of export format `fmt` (named when the row lacks a key its reward reads)."""
    extra = dict(extra_info or {})
    # the row names its reward (a recipe may reuse another paper's reward); older rows name only the recipe
    recipe = extra.get("reward") or extra.get("recipe") or DATA_SOURCE_RECIPE.get(data_source)
    if recipe is None:
        raise ValueError(
            f"compute_score: cannot tell the reward of data_source {data_source!r}; "
            f"export with extra_info.reward set (one of {list(known_rewards())})"
        )
    check_row_keys(str(recipe), extra, str(extra.get("task_id") or data_source), fmt)
    # a trainer that decodes without skipping special tokens leaves "<|im_end|>", "<|endoftext|>" padding, ... at the end
    ep = episode_from_solution(strip_end_markers(solution_str or ""), extra)
    gold = gold_from_verl(str(ground_truth), extra)
    judge = extra.get("judge_score")
    judge_score, honesty = (None if judge is None else float(judge)), None
    reward = get_reward(str(recipe))
    if judge_score is None and reward.judged:
        honesty_gate = reward.honesty_gate and ep.retrieval_known and not retrieval_complete(ep.retrieved, gold.pages)
        reference = INSUFFICIENT if gold.sufficient is False else gold.answer
        judge_score, honesty = judge_scores(judge_setting(kwargs), gold.question, reference, ep.final_answer, honesty_gate)
    breakdown = score_episode(
        ep, gold, recipe, judge_score=judge_score, honesty_score=honesty,
        weights=kwargs.get("weights"), params=kwargs.get("params"),
    )
    return breakdown.as_dict()
