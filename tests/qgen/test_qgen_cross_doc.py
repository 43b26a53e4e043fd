"""Linked questions across two documents (two companies' 10-Ks): the same line, the same fiscal year and kind of
period, and amounts only when both tables state their scale. Small synthetic tables; answers computed by hand."""

from __future__ import annotations

from vrag_data.qgen.cross_doc import company
from vrag_data.qgen.naming import table_title
from vrag_data.qgen.periods import period_kind
from vrag_data.qgen.evidence import Evidence, Region
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.scale import table_scale
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.schema.records import Box, LayoutBlock, Page

ALPHA = "the Form 10-K of Alpha Corp for the fiscal year ended December 31, 2022"
BETA = "the Form 10-K of Beta Inc. for the fiscal year ended June 30, 2022"
LABELS = {"alpha": ALPHA, "beta": BETA}

ALPHA_MD = """| Years ended December 31, | 2022 | 2021 |
|---|---|---|
| Net sales | 1,200 | 1,100 |
| Net income | 300 | 250 |
| Total | 1,500 | 1,350 |"""
BETA_MD = """| For the years ended June 30, | 2022 | 2021 |
|---|---|---|
| Net sales | 900 | 950 |
| Net Income | 120 | 80 |
| Total | 1,020 | 1,030 |"""


def _page_text(statement: str, md: str) -> str:
    """A page's text layer as ingest keeps it: title, unit line, column names, then one cell a line."""
    cells = [c.strip() for line in md.splitlines()[2:] for c in line.strip("|").split("|")]
    return "\n".join(["Consolidated Statements of Income", statement, "2022", "2021", *cells])


def _region(md: str, stem: str, statement: str, page: int = 40) -> Region:
    pg = Page(page_id=f"{stem}_{page}", doc_id=f"sha_{stem}", stem=stem, page=page, image=f"pages/{stem}_{page}.jpg",
              width=1000, height=1400, dpi=144, text=_page_text(statement, md))
    block = LayoutBlock(block_id=f"{pg.page_id}#0", doc_id=pg.doc_id, page_id=pg.page_id, page=page, cls="table",
                        bbox=Box.from_raw((50, 50, 900, 600), 1000, 1400), text=md, source="find_tables")
    return Region(block, pg, "table")


def _writes(a: Region, b: Region, n: int = 24) -> list[Written | Rejected]:
    w = OracleWriter({}, LABELS)
    return [w.write_sync(Attempt(i, Evidence("cross_doc", (a, b)), "logic")) for i in range(n)]


def test_the_same_line_year_and_scale_gives_a_question_naming_both_documents():
    outs = _writes(_region(ALPHA_MD, "alpha", "(in millions)"), _region(BETA_MD, "beta", "($ in millions)"))
    written = [o for o in outs if isinstance(o, Written)]
    assert written and all(ALPHA in o.question and BETA in o.question for o in written)
    # hand-computed: Alpha minus Beta, the same line and year, both in millions
    diffs = {("Net sales", "2022"): 300, ("Net sales", "2021"): 150, ("Net income", "2022"): 180,
             ("Net income", "2021"): 170}
    seen = set()
    for o in written:
        (_, ra, ca, _), (_, rb, cb, _) = o.cells
        assert ra.lower() == rb.lower() and ca == cb and ra != "Total"
        alpha_first = o.question.index(ALPHA) < o.question.index(BETA)
        if "minus" in o.question:
            assert "in millions" in o.question
            assert float(o.answer) == diffs[(ra if alpha_first else rb, ca)] * (1 if alpha_first else -1)
            seen.add("difference")
        elif "divided by" in o.question:  # a line item of the two companies (`line_items.cross_item`), in dollars
            ratios = {("Net sales", "2022"): 1200 / 900, ("Net sales", "2021"): 1100 / 950,
                      ("Net income", "2022"): 300 / 120, ("Net income", "2021"): 250 / 80}
            want = ratios[(ra if alpha_first else rb, ca)] ** (1 if alpha_first else -1)
            assert abs(float(o.answer) - want) <= 0.006, (o.question, o.answer, want)
            seen.add("ratio")
        else:
            assert o.answer == "Alpha Corp" and o.question.startswith("Which company")  # Alpha is higher in each
            seen.add("higher")
        assert [h.answer for h in o.hops] == list(o.visible)  # each hop reads one cell of one document
    assert {"difference", "higher"} <= seen


def test_thousands_and_millions_are_compared_in_dollars_and_never_subtracted():
    thousands = ALPHA_MD.replace("1,200", "1,250,000").replace("300", "90,000")
    outs = _writes(_region(thousands, "alpha", "(Dollars in thousands, except per share data)"),
                   _region(BETA_MD, "beta", "(in millions)"))
    written = [o for o in outs if isinstance(o, Written)]
    assert written and not any("minus" in o.question or "ratio" in o.question for o in written)
    for o in written:
        (_, ra, ca, _), _ = o.cells
        # 90,000 thousand = $90 million < $120 million; 1,250,000 thousand = $1,250 million > $900 million
        if "divided by" in o.question:  # Alpha's line item over Beta's, in dollars
            assert o.answer == {("Net income", "2022"): "0.750", ("Net sales", "2022"): "1.39"}[(ra, ca)]
            continue
        want = {("Net income", "2022"): "Beta Inc.", ("Net sales", "2022"): "Alpha Corp"}.get((ra, ca))
        assert want is None or o.answer == want
        assert "thousands" in o.question and "millions" in o.question
    assert any(o.answer == "Beta Inc." for o in written)


def test_an_unknown_scale_gives_no_amount_question():
    outs = _writes(_region(ALPHA_MD, "alpha", "Our results were as follows"), _region(BETA_MD, "beta", "(in millions)"))
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


def test_three_months_and_a_year_are_two_periods():
    quarter = ALPHA_MD.replace("| Years ended December 31, | 2022 | 2021 |",
                               "| Item | Three Months Ended December 31, 2022 | Three Months Ended December 31, 2021 |")
    assert period_kind("Three Months Ended December 31, 2022", "Item", ALPHA) == "3m"
    assert period_kind("2022", "For the years ended June 30,", BETA) == "12m"
    assert period_kind("2023", "", "the Form 10-Q of Gamma Inc. for the quarterly period ended July 2, 2023") is None
    outs = _writes(_region(quarter, "alpha", "(in millions)"), _region(BETA_MD, "beta", "(in millions)"))
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


def test_generic_labels_name_no_line_across_documents():
    generic = """| Years ended December 31, | 2022 | 2021 |
|---|---|---|
| Total | 1,500 | 1,350 |
| Other | 12 | 14 |"""
    outs = _writes(_region(generic, "alpha", "(in millions)"), _region(generic.replace("1,500", "1,020"), "beta",
                                                                         "(in millions)"))
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


def test_the_scale_is_read_from_the_table_or_the_lines_right_above_it():
    assert table_scale("| (In millions, except per share data) | 2022 |\n|---|---|\n| Net income | 5 |", "") == 1e6
    assert table_scale(ALPHA_MD, _page_text("(Millions, except percentages)", ALPHA_MD)) == 1e6
    assert table_scale(ALPHA_MD, _page_text("(Amounts in thousands)", ALPHA_MD)) == 1e3
    # a statement above another table's amounts is not this table's; another currency is no dollar scale
    other = "(in millions)\nRevenue\n5,000\n" + _page_text("", ALPHA_MD)
    assert table_scale(ALPHA_MD, other) is None
    assert table_scale(ALPHA_MD, _page_text("(\u20ac in millions)", ALPHA_MD)) is None
    assert table_scale(ALPHA_MD, _page_text("(shares in millions)", ALPHA_MD)) is None


def test_company_and_title_come_from_the_document_name_and_the_page():
    assert company(ALPHA) == "Alpha Corp" and company("\u201cAmerican Express Company\u201d (2022)") == \
        "American Express Company"
    assert table_title(["(in millions)", "PARENT COMPANY \u2013 CONDENSED BALANCE SHEETS"]) == \
        "Parent Company \u2013 Condensed Balance Sheets"
    assert table_title(["Years ended December 31,", "The following table shows our results."]) == ""


def test_a_parent_company_or_guarantor_statement_is_not_the_company_figure():
    parent = _region(ALPHA_MD, "alpha", "(in millions)")
    parent.page.text = "Deed of Cross Guarantee\n" + parent.page.text
    outs = _writes(parent, _region(BETA_MD, "beta", "(in millions)"))
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)
