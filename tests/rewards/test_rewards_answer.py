"""Rule-based answer scorers: hand-checked cases, and the real benchmark answers of the shared corpus."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vrag_data.rewards.answer import (
    anls, answer_correct, exact_match, infer_format, is_unanswerable, normalize_answer, numeric_match, parse_list,
    parse_number, token_f1,
)


def test_normalize_and_exact_match():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffel tower"
    assert exact_match("the eiffel tower", "Eiffel Tower.") == 1.0
    assert exact_match("eiffel", "Eiffel Tower") == 0.0
    assert exact_match("Paris", ["London", "paris"]) == 1.0


def test_token_f1_hand_computed():
    # pred tokens {net, revenue, grew}, gold {revenue, grew, fast, overall}: overlap 2
    # precision 2/3, recall 2/4 -> F1 = 2*(2/3)*(1/2)/((2/3)+(1/2)) = (2/3)/(7/6) = 4/7
    assert token_f1("net revenue grew", "revenue grew fast overall") == pytest.approx(4 / 7)
    assert token_f1("", "") == 1.0
    assert token_f1("abc", "xyz") == 0.0


def test_anls_threshold():
    # "abcd" vs "abce": distance 1 over length 4 -> 1 - 0.25 = 0.75
    assert anls("abcd", "abce") == pytest.approx(0.75)
    # "ab" vs "ax": normalised distance 0.5 is not below the 0.5 threshold -> 0
    assert anls("ab", "ax") == 0.0
    assert anls("Hello", "hello") == 1.0
    assert anls("kitten", ["sitting", "kitten"]) == 1.0


@pytest.mark.parametrize(
    "pred,gold,ok",
    [
        ("18.3%", "18.29%", True),  # |18.3-18.29|/18.3 = 0.05% < 1%
        ("0.1829", "18.29%", True),  # fraction vs percent
        ("$1,234.5 million", "1234.5", True),
        ("1.2 million", "1,200,000", True),
        ("(12)", "-12", True),  # accounting negative
        ("about 42 people", "42", True),
        ("43", "42", False),  # 1/42 = 2.4% > 1%
        ("no number", "42", False),
    ],
)
def test_numeric_match(pred, gold, ok):
    assert numeric_match(pred, gold, rel_tol=0.01) is ok


def test_parse_number_details():
    assert parse_number("$3.5bn") == (3.5, False, 1e9)
    assert parse_number("-7%") == (-7.0, True, 1.0)
    assert parse_number("n/a") is None


@pytest.mark.parametrize(
    "pred,gold,fmt,score",
    [
        ("42", "42", "Int", 1.0),
        ("42 people", "42", "Int", 1.0),
        ("41", "42", "Int", 0.0),
        ("18.3%", "18.29%", "Float", 1.0),
        ("19%", "18.29%", "Float", 0.0),
        ("Not answerable", "Not answerable", "None", 1.0),
        ("The document does not say; the question cannot be answered.", "Not answerable", "None", 1.0),
        ("2019", "Not answerable", "None", 0.0),
        ("https://example.com/a", "https://example.com/b", "Str", 0.0),  # URLs must match exactly
        ("2019-05-01", "2019-05-01", "Str", 1.0),
        ("['Apple', 'Banana']", "['banana', 'apple']", "List", 1.0),
        ("apple, banana, cherry", "['banana', 'apple']", "List", 0.0),  # length differs
        ("[1, 2.0]", "['2', '1']", "List", 1.0),
    ],
)
def test_answer_correct_by_format(pred, gold, fmt, score):
    assert answer_correct(pred, gold, fmt) == pytest.approx(score)


def test_answer_correct_str_uses_anls():
    # "independents" vs "independent": distance 1 over 12 -> 11/12
    assert answer_correct("Independents", "Independent", "Str") == pytest.approx(11 / 12)
    assert answer_correct(None, "x", "Str") == 0.0


def test_infer_format_and_lists():
    assert infer_format("Not answerable") == "None"
    assert infer_format("['a', 'b']") == "List"
    assert infer_format("1,024") == "Int"
    assert infer_format("3.5%") == "Float"
    assert infer_format("Paris") == "Str"
    assert parse_list("a; b and c") == ["a", "b", "c"]
    assert is_unanswerable("insufficient to answer")


@pytest.mark.slow
@given(st.text(max_size=30))
def test_self_match_is_perfect(s):
    assert anls(s, s) == 1.0
    assert token_f1(s, s) == 1.0
    assert answer_correct(s, s, "Str") == 1.0 or not s.strip()


@pytest.mark.slow
@given(st.text(max_size=20), st.text(max_size=20))
def test_scores_are_bounded(a, b):
    for f in (anls, token_f1, exact_match):
        assert 0.0 <= f(a, b) <= 1.0
    assert 0.0 <= answer_correct(a, b) <= 1.0


def test_gold_answers_of_the_real_benchmark_score_themselves(shared_corpus):
    """Every MMLongBench-Doc gold answer, as a prediction, scores 1 under its own format; and a wrong
    number scores 0 for Int/Float answers."""
    rows = [json.loads(line) for line in (shared_corpus / "qa.jsonl").read_text().splitlines() if line.strip()]
    assert rows
    for r in rows:
        assert answer_correct(r["answer"], r["answer"], r.get("answer_format")) == 1.0, r["id"]
        if r.get("answer_format") in ("Int", "Float") and parse_number(r["answer"]):
            v = parse_number(r["answer"])[0]
            assert answer_correct(str(v * 2 + 7), r["answer"], r["answer_format"]) == 0.0, r["id"]
