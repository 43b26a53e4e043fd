"""Retrieval and crop rewards against hand-computed cases, plus invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vrag_data.rewards.crop import crop_reward, iou
from vrag_data.rewards.retrieval import (
    interleave_by_rank, interleaved_ndcg, ndcg, read_page_recall, selection_reward, selection_step_reward,
    visor_retrieval_reward,
)

L3, L5 = math.log2(3), math.log2(5)
IDCG2 = 1 + 1 / L3  # two gold pages at ranks 1, 2


def test_ndcg_hand_computed():
    # [a, x, b]: DCG = 1/log2(2) + 1/log2(4) = 1.5
    assert ndcg(["a", "x", "b"], ["a", "b"]) == pytest.approx(1.5 / IDCG2)  # 0.9197
    assert ndcg(["a", "b", "x"], ["a", "b"]) == pytest.approx(1.0)
    assert ndcg(["x", "y"], ["a"]) == 0.0
    # IDCG is over the gold set only: one gold found first of two -> 1 / (1 + 1/log2 3)
    assert ndcg(["a"], ["a", "b"]) == pytest.approx(1 / IDCG2)


def test_ndcg_dedups_retrieved():
    # [x, a, a, b] -> [x, a, b]: DCG = 1/log2(3) + 1/log2(4)
    assert ndcg(["x", "a", "a", "b"], ["a", "b"]) == pytest.approx((1 / L3 + 0.5) / IDCG2)  # 0.6934
    assert ndcg(["a", "a", "a"], ["a"]) == 1.0


def test_ndcg_without_gold():
    assert ndcg(["a"], []) == 0.0
    assert ndcg(["a"], [], no_gold=1.0) == 1.0


def test_interleaved_rank_ndcg():
    searches = [["x", "y", "a"], ["b"]]
    # rank 1 of each search, then rank 2, ...: [x, b, y, a]
    assert interleave_by_rank(searches) == ["x", "b", "y", "a"]
    # DCG = 1/log2(3) (b at 2) + 1/log2(5) (a at 4) = 1.0616; / IDCG2 = 0.6509
    assert interleaved_ndcg(searches, ["a", "b"]) == pytest.approx((1 / L3 + 1 / L5) / IDCG2)
    # plain concatenation would score lower ([x, y, a, b] -> (1/2 + 1/log2 5) / IDCG2 = 0.5706)
    assert ndcg(["x", "y", "a", "b"], ["a", "b"]) < interleaved_ndcg(searches, ["a", "b"])
    # whole page ids are compared, never their characters (the reference implementation's bug)
    assert interleaved_ndcg([["report_12"]], ["report_12"]) == 1.0
    assert interleave_by_rank([["a", "b"], ["a", "c"]]) == ["a", "b", "c"]


def test_selection_reward_with_pseudo_positive():
    gold = ["a", "b"]
    assert selection_step_reward(["x", "a", "y"], ["a"], gold) == 1.0  # gold among candidates, chosen
    assert selection_step_reward(["x", "a", "y"], ["x"], gold) == 0.0  # gold among candidates, missed
    assert selection_step_reward(["x", "y"], ["x"], gold) == 1.0  # no gold: top candidate is pseudo-positive
    assert selection_step_reward(["x", "y"], ["y"], gold) == 0.0
    assert selection_step_reward(["a", "x"], ["a", "x"], gold) == 0.5  # two picked, one gold
    assert selection_step_reward(["a"], [], gold) == 0.0
    steps = [(["x", "a", "y"], ["a"]), (["x", "y"], ["x"]), (["y", "z"], ["z"])]
    assert selection_reward(steps, gold) == pytest.approx((1 + 1 + 0) / 3)
    assert selection_reward([], gold) == 0.0


@pytest.mark.parametrize(
    "searches,expected",
    [
        ([["x"], ["a"], ["b"], ["y"]], 0.0),  # complete at t*=3, T=4 -> delta 1: one verification
        ([["a"], ["b"]], -0.5),  # delta 0: stopped without verification
        ([["a"], ["b"], ["x"], ["y"], ["z"]], -0.3),  # delta 3 -> -0.1 * 3
        ([["a"], ["x"]], -1.0),  # b never retrieved
        ([["a", "b"], ["x"], ["y"]], -0.2),
    ],
)
def test_visor_retrieval_reward(searches, expected):
    assert visor_retrieval_reward(searches, ["a", "b"]) == pytest.approx(expected)


def test_read_page_recall():
    assert read_page_recall(["p1", "p2", "p9"], ["p1", "p3"]) == 0.5
    assert read_page_recall([], []) == 1.0


def test_iou_hand_computed():
    # overlap 5x5 = 25, union 100 + 100 - 25 = 175
    assert iou([0, 0, 10, 10], [5, 5, 15, 15]) == pytest.approx(25 / 175)
    assert iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0
    assert iou([10, 10, 0, 0], [0, 0, 10, 10]) == 1.0  # corner order does not matter
    assert iou([0, 0, 0, 10], [0, 0, 0, 10]) == 0.0  # zero area


def test_crop_reward_best_match_mean():
    gold = {"p1": [[5, 5, 15, 15], [0, 0, 10, 20]]}
    preds = [("p1", [0, 0, 10, 10]), ("p2", [0, 0, 10, 10])]
    # p1 box: best of 25/175 and 100/200 -> 0.5; p2 box: no gold on p2 -> 0; mean 0.25
    assert crop_reward(preds, gold) == pytest.approx(0.25)
    assert crop_reward([], gold) == 0.0


pages = st.lists(st.sampled_from(list("abcdefgh")), max_size=12)


@given(pages, pages)
def test_ndcg_bounded(retrieved, gold):
    assert 0.0 <= ndcg(retrieved, gold) <= 1.0


@given(st.lists(st.sampled_from(list("abcdefgh")), min_size=1, max_size=5, unique=True), pages)
def test_ndcg_perfect_when_gold_first(gold, tail):
    assert ndcg(gold + tail, gold) == pytest.approx(1.0)


@given(st.lists(pages, max_size=4), pages)
def test_interleaved_ndcg_bounded(searches, gold):
    assert 0.0 <= interleaved_ndcg(searches, gold) <= 1.0


coord = st.floats(0, 1000, allow_nan=False)


@st.composite
def boxes(draw):
    x1, y1 = draw(st.floats(0, 990)), draw(st.floats(0, 990))
    return [x1, y1, x1 + draw(st.floats(1, 500)), y1 + draw(st.floats(1, 500))]


@given(boxes(), boxes())
def test_iou_symmetric_and_bounded(a, b):
    assert iou(a, b) == pytest.approx(iou(b, a))
    assert 0.0 <= iou(a, b) <= 1.0 + 1e-12


@given(boxes())
def test_iou_self_is_one(a):
    assert iou(a, a) == pytest.approx(1.0)
