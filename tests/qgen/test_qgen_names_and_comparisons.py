"""Issue 41, tables named by what they measure and comparisons a reader would make: a table is named by its
numbered caption, its title (never one of its own header cells or a running page header) or the lead-in sentence
that introduces it; a comparison weighs two positive amounts of one section (no outflow printed negative, no two
periods' lines, no result line against a line it is computed from), and a short row is named with its section."""

from __future__ import annotations

import re

from vrag_data.qgen.evidence import Evidence, Region
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.schema.records import Box, LayoutBlock, Page

LABELS = {"acme": "the Form 10-K of Acme Corp for fiscal year 2022"}
DERIV = """| Contract Type | Notional Amount 2023 | Notional Amount 2022 |
|---|---|---|
| Foreign exchange forwards | 250 | 310 |
| Interest rate swaps | 600 | 600 |"""


def test_a_header_cell_printed_above_the_rows_is_no_title_but_the_lead_in_sentence_names_the_table() -> None:
    page = ("The notional amounts of our derivative instruments were as follows ($ in millions):\n\n"
            "Contract Type\nNotional Amount\n2023\n2022\nForeign exchange forwards\n250\n310\nInterest rate swaps\n600\n600")
    assert table_name(DERIV, page) == "table of notional amounts of our derivative instruments"
    # without the sentence: "Contract Type" (a header cell) is not taken for a title
    assert table_name(DERIV, page.split("\n\n", 1)[1]) == ""


def test_a_running_header_is_no_title_and_a_sentence_case_title_printed_alone_is() -> None:
    md = "| ($ million) | 2023 | 2022 |\n|---|---|---|\n| Cash | 10 | 12 |\n| Total debt | 50 | 40 |"
    body = "($ million)\n2023\n2022\nCash\n10\n12\nTotal debt\n50\n40"
    assert table_name(md, f"Notes to Consolidated Financial Statements\n\n{body}") == ""
    assert table_name(md, f"Some text that ends a paragraph.\n\nReconciliation of net debt\n\n{body}") == \
        "Reconciliation of net debt"
    # a sentence-case line inside running text is no title
    assert table_name(md, f"growth in the year was driven by\nstronger volumes in all regions\n{body}") == ""


def test_a_papers_numbered_caption_names_its_table_above_or_below() -> None:
    md = "| Method | GSM8K | MATH |\n|---|---|---|\n| CoT | 57.1 | 20.3 |\n| Ours | 63.4 | 24.8 |"
    body = "Method\nGSM8K\nMATH\nCoT\n57.1\n20.3\nOurs\n63.4\n24.8"
    below = f"{body}\nTable 3: Accuracy of prompting methods on two math benchmarks. Best results in bold.\n"
    assert table_name(md, below) == "Table 3 (Accuracy of prompting methods on two math benchmarks)"


def _region(md: str, text: str) -> Region:
    pg = Page(page_id="acme_7", doc_id="sha_acme", stem="acme", page=7, image="pages/acme_7.jpg", width=1000,
              height=1400, dpi=144, text=text, tables_md=[md])
    block = LayoutBlock(block_id="acme_7#0", doc_id=pg.doc_id, page_id=pg.page_id, page=7, cls="table",
                        bbox=Box.from_raw((50, 50, 900, 600), 1000, 1400), text=md, source="find_tables")
    return Region(block, pg, "table")


def _page(title: str, md: str) -> str:
    cells = [c.strip() for line in md.splitlines()[2:] for c in line.strip("|").split("|")]
    return "\n".join([title, "(in millions)", *[c for c in cells if c]])


def _compare(md: str, n: int = 16) -> list[Written | Rejected]:
    region = _region(md, _page("Consolidated Statements of Cash Flows", md))
    w = OracleWriter({}, LABELS)
    return [w.write_sync(Attempt(i, Evidence("single", (region,)), "logic")) for i in range(n)]


def test_outflows_printed_negative_are_never_weighed_as_higher() -> None:
    md = """| Item | 2022 |
|---|---|
| Dividends paid | (402) |
| Restructuring charges | (16) |
| Depreciation | 120 |
| Share-based compensation | 45 |"""
    outs = [o for o in _compare(md) if isinstance(o, Written)]
    assert outs and all("Dividends" not in o.question and "Restructuring" not in o.question for o in outs)
    assert all(o.answer == "Depreciation" for o in outs)


def test_two_periods_lines_and_result_lines_are_no_pair() -> None:
    md = """| Item | Total |
|---|---|
| Net earnings, three months 2023 | 1,200 |
| Net earnings, six months 2022 | 2,100 |
| Gross profit | 900 |
| Operating income | 400 |"""
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in _compare(md))


def test_a_short_row_is_named_with_its_section_and_is_a_per_share_figure_there() -> None:
    md = """| Item | 2022 | 2021 |
|---|---|---|
| Net earnings | 1,500 | 1,400 |
| Earnings per share: | | |
| Basic | 4.10 | 3.20 |
| Diluted | 4.05 | 3.18 |"""
    grid = table_grid(md)
    assert grid.row_phrase("Basic") == "Basic (under Earnings per share)"
    assert grid.unit("4.10", "Basic") == "per-share" and grid.unit("1,500", "Net earnings") == "plain"
    region = _region(md, _page("Consolidated Statements of Earnings", md))
    w = OracleWriter({}, LABELS)
    outs = [w.write_sync(Attempt(i, Evidence("single", (region,)), "extraction")) for i in range(12)]
    asked_basic = [o for o in outs if isinstance(o, Written) and o.cells[0][1] == "Basic"]
    assert asked_basic and all("value of Basic (under Earnings per share)?" in o.question for o in asked_basic)


def test_a_caption_wrapped_over_lines_is_read_whole() -> None:
    md = "| Error Type | 2-hop |\n|---|---|\n| Syntax error | 0% |\n| Semantic error | 29% |"
    page = ("Error Type\n2-hop\nSyntax error\n0%\nSemantic error\n29%\nTable 2: Reasoning program evaluation for "
            "incorrectly-\npredicted examples from each hop length.\n")
    assert table_name(md, page) == "Table 2 (Reasoning program evaluation for incorrectly-predicted examples from each...)"


def test_a_lead_in_clause_or_a_sentence_begun_above_names_no_table() -> None:
    md = "| | 2015 | 2014 |\n|---|---|---|\n| Numerator | 122 | 266 |\n| Shares | 425 | 420 |"
    body = "2015\n2014\nNumerator\n122\n266\nShares\n425\n420"
    page = ("Basic earnings per share is computed using the weighted-average number of outstanding shares of common\n"
            "stock and the computation is as follows (in thousands):\n" + body)
    assert table_name(md, page) == ""


def test_share_counts_a_cash_balance_and_a_flow_are_no_pair() -> None:
    md = """| Item | 2017 |
|---|---|
| Net service sales | 450 |
| Proceeds from issuance of common stock | 300 |
| Cash and cash equivalents, beginning of year | 1,900 |
| Weighted-average shares used in computation of earnings per share: | |
| Basic | 480 |"""
    grid = table_grid(md)
    assert grid.unit("480", "Basic") == "shares"
    outs = [o for o in _compare(md, 24) if isinstance(o, Written)]
    assert outs and all("Basic" not in o.question and "beginning of year" not in o.question for o in outs)


def test_a_title_wrapped_before_its_period_keeps_its_words_only() -> None:
    md = "| Director | Salary | Total |\n|---|---|---|\n| A. Singh | 94.50 | 190.63 |\n| B. Sen | 10.00 | 12.00 |"
    page = ("REPORT ON CORPORATE GOVERNANCE\n\nDetails of Remuneration of the Directors for the\n"
            "financial year ended 31st March, 2007\n\n(Rs. in Lakhs)\n\nDirector\nSalary\nTotal\n\nA. Singh\n94.50\n190.63\n"
            "B. Sen\n10.00\n12.00")
    assert table_name(md, page) == "Details of Remuneration of the Directors"


def test_a_section_ends_at_its_total() -> None:
    md = """| | 2023 | 2022 |
|---|---|---|
| Current assets: | | |
| Cash | 10 | 12 |
| Total current assets | 40 | 42 |
| Goodwill | 50 | 50 |"""
    grid = table_grid(md)
    assert grid.row_phrase("Cash") == "Cash (under Current assets)" and grid.row_phrase("Goodwill") == "Goodwill"


def test_signed_changes_of_balances_are_not_weighed() -> None:
    md = """| Item | 2022 |
|---|---|
| Depreciation | 120 |
| Share-based compensation | 45 |
| Changes in operating assets and liabilities: | |
| Accounts payable | 322 |
| Other operating assets and liabilities, net | 623 |"""
    outs = [o for o in _compare(md) if isinstance(o, Written)]
    assert outs and all("Accounts payable" not in o.question and "Other operating" not in o.question for o in outs)


def test_lines_on_two_sides_of_a_total_or_a_result_line_are_not_weighed() -> None:
    md = ("|  | 2023 | 2022 |\n|---|---|---|\n| Net product sales | 60,000 | 56,000 |\n| Net service sales | 67,000 | 62,000 |\n"
          "| Total net sales | 127,000 | 118,000 |\n| Fulfillment | 20,000 | 19,000 |\n| Technology and content | 21,000 | 18,000 |\n"
          "| Income before income taxes | 4,000 | 3,000 |\n| Provision for income taxes | 900 | 800 |\n"
          "| Equity-method investment activity | 5 | 7 |")
    outs = [o for o in _compare(md, 40) if isinstance(o, Written)]
    assert outs
    groups = [{"Net product sales", "Net service sales"}, {"Fulfillment", "Technology and content"},
              {"Provision for income taxes", "Equity-method investment activity"}]
    for o in outs:  # two lines of one group: never a sales line against an expense or a tax line
        pair = set(re.findall(r"value: (.+?) or (.+?)\?", o.question)[0])
        assert any(pair <= g for g in groups), o.question
