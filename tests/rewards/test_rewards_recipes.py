"""Per-recipe reward breakdowns and the verl entry point, with the arithmetic written out."""

from __future__ import annotations

import math

import pytest

from tests.support.rewards_factory import make_task, make_traj
from vrag_data.rewards import score_trajectory
from vrag_data.rewards.recipes import resolve_weights
from vrag_data.rewards.verl import compute_score, split_turns

NDCG_RANK2 = 1 / math.log2(3)  # one gold page found at rank 2 of the de-duplicated list



@pytest.fixture(autouse=True)
def _rule_judge(monkeypatch):
    """These tests check the rule-judged rewards; the rule scorers are asked for explicitly, as a user would."""
    monkeypatch.setenv("VRAG_REWARD_JUDGE", "rules")

def test_vrag_rl_reward():
    task = make_task(answer="42", fmt="Int", pages=["doc_3"])
    traj = make_traj(task, [("search", "revenue 2019", ["doc_1", "doc_3"]), ("answer", "42")])
    r = score_trajectory(traj, task)
    assert r.components == pytest.approx({"judge": 1.0, "format": 1.0, "ndcg": NDCG_RANK2})
    # 0.7*1 + 0.1*1 + 0.2*0.6309 = 0.92619
    assert r.total == pytest.approx(0.7 + 0.1 + 0.2 * NDCG_RANK2)
    # a model judge's verdict replaces the rule scorer
    r0 = score_trajectory(traj, task, judge_score=0.0)
    assert r0.total == pytest.approx(0.1 + 0.2 * NDCG_RANK2)


def test_vrag_rl_format_gate():
    task = make_task(answer="42", fmt="Int")
    traj = make_traj(task, [("answer", "42")])  # right answer, never searched
    r = score_trajectory(traj, task)
    assert r.components["judge"] == 1.0 and r.components["format"] == 0.0
    assert r.total == 0.0 and r.gated
    # weights are configurable; unknown names are refused
    assert score_trajectory(traj, task, weights={"format": 0.0}, params={"gate_on_format": 0}).total == pytest.approx(0.7)
    with pytest.raises(ValueError, match="unknown reward weight"):
        resolve_weights("vrag_rl", {"ndgc": 1})


def test_unidoc_rl_reward():
    task = make_task(answer="42", pages=["doc_3"], boxes={"doc_3": [(100, 100, 300, 400)]})
    traj = make_traj(
        task,
        [("search", "q", ["doc_1", "doc_3", "doc_5"]), ("select", [1], ["doc_3"]),
         ("crop", "doc_3", (100, 100, 300, 300)), ("answer", "42")],
        recipe="unidoc_rl",
    )
    r = score_trajectory(traj, task)
    iou = (200 * 200) / (200 * 300)  # crop inside the gold box: 40000 / 60000
    assert r.components == pytest.approx(
        {"judge": 1.0, "ndcg": NDCG_RANK2, "select": 1.0, "crop": iou, "format": 1.0}
    )
    # 0.6*1 + 0.1*0.6309 + 0.1*1 + 0.1*0.6667 + 0.1*1 = 0.92976
    assert r.total == pytest.approx(0.6 + 0.1 * NDCG_RANK2 + 0.1 + 0.1 * iou + 0.1)


def test_unidoc_rl_format_rejects_two_actions_in_one_turn():
    task = make_task()
    traj = make_traj(task, [("search", "q", ["doc_3"]), ("answer", "42")], recipe="unidoc_rl")
    bad_turn = traj.turns[0].model_copy(update={"assistant": "<search>a</search><search>b</search>"})
    bad = traj.model_copy(update={"turns": [bad_turn, traj.turns[1]]})
    assert score_trajectory(bad, task).components["format"] == 0.0


def test_visor_reward_cases():
    task = make_task(answer="42", pages=["doc_3", "doc_5"])
    good = make_traj(task, [("search", "q", ["doc_1"]), ("search", "q", ["doc_3"]), ("search", "q", ["doc_5"]),
                            ("search", "q", ["doc_7"]), ("answer", "42")], recipe="visor")
    r = score_trajectory(good, task)
    # complete at t*=3 of T=4 -> delta 1 -> r_ret 0; judge 1; (1 + 0) * (1 - 0) - 0 = 1
    assert r.components == pytest.approx({"answer": 1.0, "retrieval": 0.0, "format_penalty": 0.0})
    assert r.total == pytest.approx(1.0)

    honest = make_traj(task, [("search", "q", ["doc_3"]), ("search", "q", ["doc_1"]),
                              ("answer", "insufficient to answer")], recipe="visor")
    r = score_trajectory(honest, task)
    # doc_5 missing: honesty credit 0.2 + retrieval -1.0 = -0.8
    assert r.components["answer"] == pytest.approx(0.2) and r.total == pytest.approx(-0.8)

    lucky = make_traj(task, [("search", "q", ["doc_3"]), ("answer", "42")], recipe="visor")
    # a right answer without the evidence earns nothing (gate), retrieval -1
    assert score_trajectory(lucky, task).total == pytest.approx(-1.0)

    no_search = make_traj(task, [("answer", "42")], recipe="visor")
    r = score_trajectory(no_search, task)
    assert r.components["format_penalty"] == 1.0 and r.total == -1.0


def _evis_solution(ev1: str, answer: str) -> str:
    return (f"<observe>two pages</observe>\n<evidence>\n[1]: {ev1}\n[2]: no relevant information\n</evidence>\n"
            f"<think>so</think>\n<answer>{answer}</answer>")


def test_evisrag_reward_via_verl():
    gt = "<evidence>\n[1]: revenue was 42 million\n[2]: no relevant information\n</evidence>\n<answer>42</answer>"
    extra = {"recipe": "evisrag", "gold_pages": ["doc_3"], "shown_pages": ["doc_3", "doc_9"], "answer_format": "Int"}
    out = compute_score("evisrag", _evis_solution("revenue 42", "42"), gt, extra)
    # image 1 relevant: F1({revenue,42}, {revenue,was,42,million}) = 2/3, r1 = 2 * 2/3; image 2: r2 = 1
    # perception = (4/3 + 1) / (2 + 1) = 7/9; derivation F1 = 1; format = 1
    assert out["perception"] == pytest.approx(7 / 9)
    assert out["derivation"] == 1.0 and out["format"] == 1.0
    assert out["score"] == pytest.approx((7 / 9 + 1 + 1) / 3)
    assert out["scope_perception"] == pytest.approx((7 / 9 + 1) / 2)
    # insufficient context: the target becomes "insufficient to answer"
    extra2 = {**extra, "shown_pages": ["doc_9"], "sufficient": False}
    out2 = compute_score("evisrag", "<observe>o</observe><evidence>[1]: no relevant information</evidence>"
                         "<think>t</think><answer>insufficient to answer</answer>", "42", extra2)
    assert out2["derivation"] == 1.0 and out2["perception"] == 1.0
    # tags out of order fail the format
    bad = compute_score("evisrag", "<think>t</think><observe>o</observe><evidence>[1]: x</evidence><answer>42</answer>",
                        gt, extra)
    assert bad["format"] == 0.0


def test_a_rollout_decoded_with_its_special_tokens_scores_as_without_them():
    """A trainer that decodes without skipping special tokens (VRAG-RL's fork) hands over "...</answer><|im_end|>" and
    padding: the score is the one of the reply alone, not 0 for a broken format."""
    gt = "<evidence>\n[1]: revenue was 42 million\n[2]: no relevant information\n</evidence>\n<answer>42</answer>"
    extra = {"recipe": "evisrag", "gold_pages": ["doc_3"], "shown_pages": ["doc_3", "doc_9"], "answer_format": "Int"}
    clean = compute_score("evisrag", _evis_solution("revenue 42", "42"), gt, extra)
    for tail in ("<|im_end|>", "<|im_end|>\n<|endoftext|><|endoftext|>", "</s>", "<|eot_id|>", "<end_of_turn>"):
        assert compute_score("evisrag", _evis_solution("revenue 42", "42") + tail, gt, extra) == clean, tail
    assert clean["format"] == 1.0
    mm = {"recipe": "mmdoc_r1", "gold_pages": ["doc_3"], "read_pages": ["doc_3"], "answer_format": "Str"}
    assert compute_score("mmlongbench", "<answer>Paris</answer><|im_end|>", "Paris", mm)["correctness"] == 1.0


def test_mmdoc_r1_reward_via_verl():
    extra = {"recipe": "mmdoc_r1", "gold_pages": ["doc_3", "doc_5"], "read_pages": ["doc_3", "doc_4"],
             "answer_format": "Float"}
    out = compute_score("mmlongbench", "<answer>18.3%</answer>", "18.29%", extra)
    assert out["recall"] == 0.5 and out["correctness"] == 1.0 and out["score"] == 1.5


def test_verl_matches_score_trajectory():
    """The verl path and the synthesis path give the same reward for the same episode."""
    task = make_task(answer="42", pages=["doc_3"])
    traj = make_traj(task, [("search", "revenue", ["doc_1", "doc_3"]), ("answer", "42")])
    solution = "".join(f"<|im_start|>assistant\n{t.assistant}<|im_end|>\n<|im_start|>user\n[image]<|im_end|>\n"
                       for t in traj.turns)
    extra = {"recipe": "vrag_rl", "gold_pages": ["doc_3"], "answer_format": "Int", "question": task.question,
             "gold_boxes": {}, "task_id": task.task_id, "retrieved_pages": traj.retrieved_pages, "search_results": []}
    out = compute_score("rag", solution, "42", extra)
    assert out["score"] == pytest.approx(score_trajectory(traj, task).total)
    # without the rollout keys, page ids of the gold document mentioned in the text are used
    plain = "<search>revenue</search>\nResults: doc_1, doc_3\n<answer>42</answer>"
    out2 = compute_score("rag", plain, "42", {"gold_pages": ["doc_3"], "answer_format": "Int", "search_results": []})
    assert out2["ndcg"] == pytest.approx(NDCG_RANK2)
    # every rollout of a recipe returns the same keys (verl logs them as columns)
    assert set(compute_score("rag", "garbage", "42", {"gold_pages": ["doc_3"], "search_results": []})) == set(out)


def test_verl_unknown_source_needs_recipe():
    with pytest.raises(ValueError, match="extra_info.reward"):
        compute_score("mystery", "<answer>1</answer>", "1", {})


def test_split_turns_without_template():
    turns = split_turns("<think>a</think><search>q</search>obs<think>b</think><answer>x</answer>")
    assert turns == ["<think>a</think><search>q</search>", "obs<think>b</think><answer>x</answer>"]
    assert split_turns("<think>cut off") == ["<think>cut off"]


def test_paper_fixes_visor_no_answer_and_mmdoc_recall_counts_reads_only():
    from tests.support.rewards_factory import make_task, make_traj
    from vrag_data.rewards.recipes import score_trajectory

    task = make_task(answer="42", pages=["doc_3"])
    # VISOR eq. 3: I_format = 1 only when an answer comes without a search; never answering is not a format
    # violation: r = r_ans + r_ret = 0 + (-0.5: complete retrieval, no verification search) = -0.5
    silent = make_traj(task, [("search", "q", ["doc_3"])], recipe="visor")
    b = score_trajectory(silent, task, "visor")
    assert (b.components["format_penalty"], b.components["answer"], b.components["retrieval"], b.total) == (0.0, 0.0, -0.5, -0.5)
    # MM-Doc-R1: recall over pages the agent read; a search that only listed the gold page earns no recall
    listed = make_traj(task, [("search", "q", ["doc_3"]), ("answer", "42")], recipe="mmdoc_r1")
    assert score_trajectory(listed, task, "mmdoc_r1").total == 1.0  # correctness 1 + recall 0
    from vrag_data.schema.records import Action, Observation, ReadRequest, Turn

    reading = Turn(idx=1, assistant='<think>read it</think><read>[{"page_ids": [3], "query": "revenue"}]</read>',
                   action=Action(kind="read", page_ids=["doc_3"], reads=[ReadRequest(page_ids=["doc_3"], query="revenue")]),
                   observation=Observation(kind="read", text="Page 3: revenue 42"))
    read = listed.model_copy(update={"turns": [listed.turns[0], reading, listed.turns[1].model_copy(update={"idx": 2})]})
    assert score_trajectory(read, task, "mmdoc_r1").total == 2.0


def test_verl_crop_reward_reads_boxes_in_the_rows_coordinate_space():
    from vrag_data.env.geometry import raw_to_family
    from vrag_data.rewards.verl import compute_score

    gold_norm = [100, 200, 500, 600]  # 0-1000 on a 1000 x 1400 page = raw (100, 280, 500, 840)
    base = {"gold_pages": ["doc_3"], "gold_boxes": {"doc_3": [gold_norm]}, "retrieved_pages": ["doc_3"],
            "reward": "unidoc_rl", "question": "q", "answer_format": "Int", "search_results": [], "selections": []}

    def score(space, box):  # noqa: ANN001, ANN202
        extra = {**base, "coord_space": space, "max_pixels": 401408, "page_sizes": {"doc_3": [1000, 1400]}}
        sol = f"<think>s</think><search>q</search><think>z</think><bbox>{box}</bbox><think>a</think><answer>42</answer>"
        return compute_score("rag", sol, "42", extra)["crop"]

    pixels = raw_to_family((100, 280, 500, 840), 1000, 1400, "qwen2.5-vl", 401408)
    assert pixels == [53, 146, 266, 437]  # on the 532 x 728 smart-resized page
    assert score("qwen2.5-vl", pixels) > 0.98  # the perfect box in pixels of the resized page: IoU ~1 (rounding)
    assert score("qwen3-vl", gold_norm) == 1.0
    # the same numbers read as 0-1000: overlap 166 x 237 = 39342, union 213 x 291 + 400 x 400 - 39342 = 182641
    assert abs(score("qwen3-vl", pixels) - 39342 / 182641) < 1e-9


def test_evisrag_targets_evidence_and_insufficient_contexts():
    from tests.support.rewards_factory import make_task
    from vrag_data.export.rl import evidence_ground_truth
    from vrag_data.rewards.easyr1 import compute_score as easyr1_score
    from vrag_data.rewards.recipes import score_trajectory
    from vrag_data.schema.records import Action, Message, Provenance, Trajectory, Turn

    task = make_task(answer="42", pages=["doc_3"])
    from vrag_data.schema.geometry_types import Box
    from vrag_data.schema.records import EvidenceBox

    task = task.model_copy(update={"evidence_boxes": [EvidenceBox(page_id="doc_3", box=Box.from_norm((0, 0, 500, 500), 1000, 1400), text="revenue  42")]})
    # the teacher's lines are stored one per image, without their [i]: prefix (the grammar's convention)
    gt = evidence_ground_truth(task, ["doc_1", "doc_3"], ["no relevant information", "the table says revenue 42"])
    assert gt == "<evidence>\n[1]: no relevant information\n[2]: the table says revenue 42\n</evidence>\n<answer>42</answer>"
    insufficient = evidence_ground_truth(task, ["doc_1", "doc_2"])
    assert insufficient.endswith("<answer>insufficient to answer</answer>")

    def response(answer: str) -> str:
        return ("<observe>two pages</observe><evidence>\n[1]: no relevant information\n[2]: no relevant information\n"
                f"</evidence><think>nothing here</think><answer>{answer}</answer>")

    honest, bluff = easyr1_score([{"response": response("insufficient to answer"), "ground_truth": insufficient},
                                  {"response": response("42"), "ground_truth": insufficient}])
    assert honest["derivation"] == 1.0 and honest["perception"] == 1.0 and honest["overall"] == 1.0
    assert bluff["derivation"] == 0.0 and bluff["overall"] < honest["overall"]

    # a perfect trajectory (its evidence line is the gold box's text) scores perception 1.0, not 0.75
    text = "<observe>o</observe><evidence>\n[1]: no relevant information\n[2]: revenue 42\n</evidence><think>t</think><answer>42</answer>"
    traj = Trajectory(traj_id="t", run_id="r", task_id=task.task_id, sample=0, recipe="evisrag",
                      prompt=[Message(role="user", text="q")], final_answer="42", status="answered",
                      turns=[Turn(idx=0, assistant=text, action=Action(kind="answer", answer="42", evidence=["no relevant information", "revenue 42"]))],
                      extra={"shown_pages": ["doc_1", "doc_3"], "sufficient": True}, provenance=Provenance(recipe="evisrag", policy="model"))
    b = score_trajectory(traj, task, "evisrag")
    assert (b.components["perception"], b.components["derivation"], b.components["format"]) == (1.0, 1.0, 1.0)
