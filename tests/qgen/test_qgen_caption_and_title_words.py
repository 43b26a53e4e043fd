"""Issue 52, faults the round-11 hand checks found (tuning data from then on): a table caption cut at "vs." ("Table 3
(Theoretical vs)") and a 10-Q's heading "Other Income (Expense), Net" shortened to "Other Income, Net" (its
"(Expense)" taken for a short form like "(EPS)"). Each test fails on the code of round 11."""

from __future__ import annotations

from vrag_data.qgen.captions import caption_of
from vrag_data.qgen.naming import _title_line

TABLE = "| Operation | Theory | Measured |\n|---|---|---|\n| RBT Delete | O(log n) | 0.41 |\n| BST Delete | O(n) | 2.90 |"


def test_a_caption_goes_on_past_vs() -> None:
    page = ("Table 3: Theoretical vs. Empirical Complexity Validation. Times in ms.\nOperation\nTheory\nMeasured\n"
            "RBT Delete\nO(log n)\n0.41\nBST Delete\nO(n)\n2.90\n")
    assert caption_of(TABLE, page, [TABLE]) == "Table 3 (Theoretical vs. Empirical Complexity Validation)"


def test_a_word_in_parentheses_is_part_of_a_title_while_a_short_form_is_not() -> None:
    assert _title_line("Other Income (Expense), Net", alone=True) == ""  # not "Other Income, Net"
    assert _title_line("Earnings Per Share (EPS)", alone=True) == "Earnings Per Share"
