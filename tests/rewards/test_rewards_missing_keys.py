"""A reward refuses a row that lacks a key it reads (one line naming the key and what writes it) instead of scoring it
with a default; present but empty is valid and scores as before; every RL row an export writes, and every rollout the
agent loop hands the reward, carries the keys. Values below are computed by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.rewards.verl import MissingRewardKey, compute_score  # noqa: E402


@pytest.fixture(autouse=True)
def _rule_judge(monkeypatch):
    """The rule scorers stand in for the judge, asked for explicitly."""
    monkeypatch.setenv("VRAG_REWARD_JUDGE", "rules")


# A 532 x 728 page: Qwen2.5-VL at max_pixels 401408 keeps it as it is (both sides multiples of 28), so the policy's
# pixel box is the raw box. Gold [250, 250, 750, 750] in 0-1000 = raw (133, 182, 399, 546).
UNIDOC = {
    "reward": "unidoc_rl", "task_id": "t9", "question": "What was revenue?", "answer_format": "Int",
    "gold_pages": ["doc_3"], "gold_boxes": {"doc_3": [[250, 250, 750, 750]]},
    "coord_space": "qwen2.5-vl", "max_pixels": 401408, "page_sizes": {"doc_3": [532, 728]},
    "search_results": [["doc_3"]], "selections": [{"candidates": ["doc_3"], "selected": ["doc_3"]}], "read_pages": [],
}
UNIDOC_SOLUTION = ("<think>s</think><search>revenue</search>\n<think>p</think><select>1</select>\n"
                   "<think>z</think><bbox>[133, 182, 399, 546]</bbox>\n<think>a</think><answer>42</answer>")


def _without(extra: dict, key: str) -> dict:
    return {k: v for k, v in extra.items() if k != key}


def test_coord_space_given_scores_the_exact_box_and_a_row_without_it_is_refused():
    out = compute_score("rag", UNIDOC_SOLUTION, "42", UNIDOC)
    # the pixel box converts back to exactly the gold box: IoU 1; judge 1, NDCG 1 (gold at rank 1), select 1, format 1
    assert out["crop"] == 1.0
    assert (out["judge"], out["ndcg"], out["select"], out["format"]) == (1.0, 1.0, 1.0, 1.0)
    assert out["score"] == pytest.approx(0.6 + 0.1 + 0.1 + 0.1 + 0.1)
    # without coord_space the box used to be read as 0-1000: IoU 44104 / 302720 = 0.1457 and a score of 0.9146, silently
    with pytest.raises(MissingRewardKey) as err:
        compute_score("rag", UNIDOC_SOLUTION, "42", _without(UNIDOC, "coord_space"))
    msg = str(err.value)
    assert "\n" not in msg and "'coord_space'" in msg and "verl row t9" in msg
    assert "vrag-data export --format verl" in msg
    # None is absent too (a parquet null)
    with pytest.raises(MissingRewardKey, match="'coord_space'"):
        compute_score("rag", UNIDOC_SOLUTION, "42", {**UNIDOC, "coord_space": None})


@pytest.mark.parametrize("key", ["max_pixels", "page_sizes"])
def test_a_pixel_coord_space_needs_what_converting_its_boxes_needs(key):
    with pytest.raises(MissingRewardKey, match=f"'{key}'"):
        compute_score("rag", UNIDOC_SOLUTION, "42", _without(UNIDOC, key))
    # a 0-1000 space converts nothing; crops the agent loop recorded (0-1000) need no conversion either
    norm = {**_without(_without(UNIDOC, "max_pixels"), "page_sizes"), "coord_space": "qwen3-vl"}
    assert compute_score("rag", UNIDOC_SOLUTION.replace("[133, 182, 399, 546]", "[250, 250, 750, 750]"), "42", norm)["crop"] == 1.0
    crops = {**_without(UNIDOC, key), "crops": [{"page_id": "doc_3", "box": [250, 250, 750, 750]}]}
    assert compute_score("rag", UNIDOC_SOLUTION, "42", crops)["crop"] == 1.0


@pytest.mark.parametrize(("reward", "key"), [
    ("unidoc_rl", "selections"), ("unidoc_rl", "search_results"), ("unidoc_rl", "gold_boxes"),
    ("vrag_rl", "search_results"), ("visor", "search_results"), ("mmdoc_r1", "read_pages"), ("mmdoc_r1", "gold_pages"),
])
def test_a_row_without_a_key_its_reward_reads_is_refused(reward, key):
    extra = {**UNIDOC, "reward": reward}
    with pytest.raises(MissingRewardKey) as err:
        compute_score("rag", UNIDOC_SOLUTION, "42", _without(extra, key))
    msg = str(err.value)
    assert "\n" not in msg and f"extra_info lacks {key!r}" in msg and f"reward {reward!r}" in msg
    if key in ("search_results", "selections", "read_pages"):  # filled by the rollout: the message says by what
        assert "agent loop" in msg
    assert isinstance(err.value, ValueError)


def test_a_reward_without_that_component_does_not_require_the_key():
    """VRAG-RL's reward has no select / crop / read term: a row without selections, read_pages, coord_space scores.
    Text mentions doc_1, doc_3; no search recorded (search_results: []): retrieved = [doc_1, doc_3] from the text,
    NDCG = (1 / log2 3) / 1 = 0.6309; score = 0.7 * 1 + 0.1 * 1 + 0.2 * 0.6309."""
    extra = {"reward": "vrag_rl", "question": "q", "answer_format": "Int", "gold_pages": ["doc_3"], "search_results": []}
    out = compute_score("rag", "<search>revenue</search>\nResults: doc_1, doc_3\n<answer>42</answer>", "42", extra)
    assert out["ndcg"] == pytest.approx(0.630930, abs=1e-6)
    assert out["score"] == pytest.approx(0.8 + 0.2 * 0.630930, abs=1e-6)
    with pytest.raises(MissingRewardKey, match="'search_results'"):
        compute_score("rag", "<answer>42</answer>", "42", _without(extra, "search_results"))


def test_empty_rollout_keys_are_valid_and_score_the_hand_computed_value():
    """Present but empty: the rollout did no search, selection or read. UniDoc-RL on a search + answer rollout that
    names no page: judge 1, NDCG 0, select 0, crop 0 (no box), format 1 -> 0.6 + 0.1 = 0.7. MM-Doc-R1 with no page
    read: recall 0 + correctness 1 = 1.0; with doc_3 of gold {doc_3, doc_5} read: 0.5 + 1 = 1.5."""
    solution = "<think>s</think><search>revenue</search>\n<think>a</think><answer>42</answer>"
    empty = {**UNIDOC, "search_results": [], "selections": [], "read_pages": []}
    for key in ("search_results", "selections"):
        with pytest.raises(MissingRewardKey, match=repr(key)):
            compute_score("rag", solution, "42", _without(empty, key))
    out = compute_score("rag", solution, "42", empty)
    assert (out["judge"], out["ndcg"], out["select"], out["crop"], out["format"]) == (1.0, 0.0, 0.0, 0.0, 1.0)
    assert out["score"] == pytest.approx(0.7)
    mmdoc = {"reward": "mmdoc_r1", "question": "q", "answer_format": "Int", "gold_pages": ["doc_3", "doc_5"]}
    with pytest.raises(MissingRewardKey, match="'read_pages'"):
        compute_score("mmlongdoc", "<answer>42</answer>", "42", mmdoc)
    assert compute_score("x", "<answer>42</answer>", "42", {**mmdoc, "read_pages": []})["score"] == pytest.approx(1.0)
    assert compute_score("x", "<answer>42</answer>", "42", {**mmdoc, "read_pages": ["doc_3"]})["score"] == pytest.approx(1.5)


def test_visor_on_an_exported_row_judges_the_answer_and_without_search_results_refuses():
    """VISOR on an exported row (search_results: [], no agent loop record) whose text names no page: retrieval unknown,
    the answer is judged: right (1 + r_ret -1.0: no search found the gold page) * (1 - 0) = 0.0, wrong (0 - 1) = -1.0.
    The agent loop's record (retrieved_pages: []: it saw no page) applies the honesty gate: a guess earns 0 -> -1.0."""
    extra = {"reward": "visor", "question": "q", "answer_format": "Int", "gold_pages": ["doc_3"], "search_results": []}
    right = "<think>s</think><search>net income</search>\n<think>a</think><answer>42</answer>"
    with pytest.raises(MissingRewardKey, match="'search_results'"):
        compute_score("rag", right, "42", _without(extra, "search_results"))
    r, w = compute_score("rag", right, "42", extra), compute_score("rag", right.replace(">42<", ">7<"), "42", extra)
    assert (r["answer"], r["retrieval"], r["format_penalty"], r["retrieval_known"]) == (1.0, -1.0, 0.0, 0.0)
    assert (r["score"], w["score"]) == (0.0, -1.0)
    gated = compute_score("rag", right, "42", {**extra, "retrieved_pages": []})
    assert (gated["answer"], gated["score"], gated["retrieval_known"]) == (0.0, -1.0, 1.0)


def test_easyr1_and_fork_entry_points_refuse_too():
    from vrag_data.rewards import easyr1, vragrl

    gt = json.dumps({"data_source": "rag", "ground_truth": "42", "extra_info": _without(UNIDOC, "selections")})
    with pytest.raises(MissingRewardKey, match=r"easyr1 row t9: extra_info lacks 'selections'.*--format easyr1"):
        easyr1.compute_score([{"response": UNIDOC_SOLUTION, "ground_truth": gt}])
    ok = json.dumps({"data_source": "rag", "ground_truth": "42", "extra_info": UNIDOC})
    assert easyr1.compute_score([{"response": UNIDOC_SOLUTION, "ground_truth": ok}])[0]["overall"] == pytest.approx(1.0)
    # the fork's float: a data source of its own scores the format term and reads no row key; another the whole reward
    assert vragrl.compute_score("rag", UNIDOC_SOLUTION, "42", {}) == 1.0
    with pytest.raises(MissingRewardKey, match="'read_pages'"):
        vragrl.compute_score("mine", "<answer>42</answer>", "42", {"reward": "mmdoc_r1", "file_name": "d.pdf",
                                                                  "reference_page": [1]})


def test_the_shipped_reward_bundle_refuses_the_same_row(tmp_path):
    from vrag_data.export.reward_bundle import write_reward_bundle

    bundle = write_reward_bundle(tmp_path)
    code = (f"import json, sys; sys.path.insert(0, {str(bundle)!r})\n"
            "from compute_score import compute_score\nextra = json.loads(sys.argv[1])\n"
            "try:\n    compute_score('rag', sys.argv[2], '42', extra, judge='rules')\n"
            "except ValueError as err:\n    print(type(err).__name__, err)\n")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, json.dumps(_without(UNIDOC, "coord_space")),
                           UNIDOC_SOLUTION], capture_output=True, text=True, check=True, env={})
    assert proc.stdout.startswith("MissingRewardKey verl row t9: extra_info lacks 'coord_space'"), proc.stdout + proc.stderr


def _rows_of_every_export(out: Path) -> list[tuple[str, dict, str, str]]:
    """(format, extra_info, data_source, ground truth) of every RL row the verl, HF and EasyR1 exports wrote."""
    rows = []
    for f in sorted((out / "verl").glob("*.parquet")):
        rows += [("verl", dict(r["extra_info"]), r["data_source"], r["reward_model"]["ground_truth"])
                 for r in pd.read_parquet(f).to_dict("records")]
    for f in sorted((out / "hf" / "data").glob("rl-*.parquet")):
        rows += [("hf", dict(r["extra_info"]), r["data_source"], r["reward_model"]["ground_truth"])
                 for r in pd.read_parquet(f).to_dict("records")]
    for f in sorted((out / "easyr1").rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            answer = json.loads(line)["answer"]
            if answer.lstrip().startswith("{"):  # the JSON form: the row's reward and what it reads
                row = json.loads(answer)
                rows.append(("easyr1", row["extra_info"], row["data_source"], row["ground_truth"]))
    return rows


@pytest.mark.slow
def test_every_rl_row_an_export_writes_carries_the_keys_its_reward_reads(tmp_path):
    from vrag_data.export import export_run
    from vrag_data.rewards.recipes import row_keys
    from vrag_data.rewards.verl import ROLLOUT_KEYS, needed_keys

    ws = build_workspace(tmp_path / "ws")
    export_run(ws, "r1", formats=["hf", "verl", "easyr1"], out_dir=tmp_path / "o", recipes=run_recipes())
    rows = _rows_of_every_export(tmp_path / "o")
    assert {fmt for fmt, *_ in rows} == {"verl", "hf", "easyr1"}
    for fmt, extra, source, gt in rows:
        # the rollout keys are written for every row, empty (nothing searched, selected or read yet)
        for key in ROLLOUT_KEYS:
            assert extra.get(key) is not None and len(extra[key]) == 0, (fmt, key, extra.get(key))
        for key in (*row_keys(extra["reward"]), *needed_keys(extra["reward"], extra)):
            assert extra.get(key) is not None, (fmt, extra["reward"], key)
        assert extra["coord_space"] and extra["max_pixels"] is not None and extra["page_sizes"] is not None
        compute_score(source, "<think>x</think><search>total</search><answer>42</answer>", gt, extra)  # no refusal


def test_the_agent_loops_rollout_keys_complete_every_reward():
    """What the agent loop merges into `extra_info` carries every rollout key, empty when the agent did nothing of the
    kind, and the coordinate space the policy wrote in: every reward scores it without a row default."""
    pytest.importorskip("torch")
    from tests.support.rewards_factory import make_task, make_traj
    from vrag_data.export.rl import task_to_rl
    from vrag_data.rewards.recipes import score_trajectory
    from vrag_data.rewards.registry import known_rewards
    from vrag_data.train.verl_episode import reward_fields

    task = make_task(answer="42", pages=["doc_3"], boxes={"doc_3": [(250, 250, 750, 750)]})
    traj = make_traj(task, [("answer", "42")], recipe="unidoc_rl", extra={"coord_space": "qwen2.5-vl"})
    fields = reward_fields(traj)
    assert (fields["search_results"], fields["selections"], fields["read_pages"]) == ([], [], [])
    assert fields["coord_space"] == "qwen2.5-vl"
    # the agent loop's rows on their own (gold from the task, no export-time coord_space): every reward scores them
    gold = {k: v for k, v in task_to_rl(task, [], [], "unidoc_rl", 0, "vrag").extra_info.items()
            if k in ("question", "answer_format", "gold_pages", "gold_boxes", "task_id")}
    for reward in known_rewards():
        got = compute_score("vrag", "<answer>42</answer>", "42", {**gold, "reward": reward, **fields})
        assert got["score"] == pytest.approx(score_trajectory(traj, task, reward).total), reward
