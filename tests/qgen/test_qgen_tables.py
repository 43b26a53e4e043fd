"""The offline writer on a real document's extracted tables (no known facts): only well-formed questions, malformed
tables rejected with a reason; and the `tasks generate` shortfall rule (exit 3 below the floor, a warning above)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

import pytest

from tests.support.qgen_workspace import qgen_workspace
from vrag_data.cli.main import app
from vrag_data.qgen.evidence import Evidence, Region
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.writer import Attempt, Rejected
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Page

GOOD = """| Age group | Cell phone | Smartphone |
|---|---|---|
| 65-69 | 84% | 29% |
| 70-74 | 84 | 21 |
| Some college | 80 | 19 |
| Total for all 65+ 77% | 77 | 18 |
| Some college | 81 | 20 |"""

# the first row is data: "columns" would be 15.7%, 17.0%, Cooperation Rate
DATA_HEADER = """| Survey wave | 15.7% | 17.0% | Cooperation Rate |
|---|---|---|---|
| Wave 1 | 12.1% | 14.0% | Completion Rate |"""

SPLIT_HEADER = """| | Three Months | Ended | Six Months | Six Months Ended |
|---|---|---|---|---|
| Net earnings | 274 | 306 | 516 | 640 |"""

BROKEN_HEADER = """| | Three o | th Ended | Six Months |
|---|---|---|---|
| Net earnings | 274 | 306 | 516 |"""


# a printed title per page: the writer names a table by it (a table without one gives no question)
TITLES = ("Operating Results", "Segment Results", "Regional Summary", "Quarterly Highlights", "Selected Data",
          "Sales by Region", "Workforce Overview")


def page_words(title: str, md: str) -> str:
    """A page's text layer as ingest keeps it: the title, then the table's body one cell a line."""
    cells = [c.strip() for line in md.splitlines()[2:] if line.strip().startswith("|") for c in line.strip().strip("|").split("|")]
    return "\n".join([title, *[c for c in cells if c]])


def _region(text: str, stem: str = "report", page: int = 3, title: str | None = None) -> Region:
    title = TITLES[page % len(TITLES)] if title is None else title
    pg = Page(page_id=f"{stem}_{page}", doc_id=f"sha_{stem}", stem=stem, page=page, image=f"pages/{stem}_{page}.jpg",
              width=1000, height=1400, dpi=144, text=page_words(title, text) if title else "")
    block = LayoutBlock(block_id=f"{pg.page_id}#0", doc_id=pg.doc_id, page_id=pg.page_id, page=page, cls="table",
                        bbox=Box.from_raw((50, 50, 900, 600), 1000, 1400), text=text, source="pymupdf")
    return Region(block, pg, "table")


def test_table_grid_keeps_named_columns_and_unique_text_labels():
    g = table_grid(GOOD)
    assert g.problem == "" and g.header == ["Age group", "Cell phone", "Smartphone"]
    labels = {row for row, _, _ in g.cells}
    # "Some college" twice is ambiguous; "Total for all 65+ 77%" has a value glued to its label
    assert labels == {"65-69", "70-74"} or labels == {"70-74"}
    assert ("70-74", "Smartphone", "21") in g.cells


def test_malformed_tables_are_refused_with_the_reason():
    assert table_grid(DATA_HEADER).problem == "the first row holds values, not column names"
    assert "part of another" in table_grid(SPLIT_HEADER).problem
    assert "broken by text extraction" in table_grid(BROKEN_HEADER).problem
    w = OracleWriter({})
    for text in (DATA_HEADER, SPLIT_HEADER, BROKEN_HEADER):
        assert not w.accepts(_region(text))  # never offered as evidence
        out = w.write_sync(Attempt(0, Evidence("single", (_region(text),)), "extraction"))
        assert isinstance(out, Rejected) and out.reason == "table_malformed"


LABELS = {"pew": "\u201cOlder Adults Online\u201d (2014)", "report": "the Form 10-K of Acme Corp for the fiscal year "
          "ended December 31, 2023", "zen": "the Form 10-K of Zen Stores, Inc. for the fiscal year ended June 30, 2023"}

SEGMENTS = """| Segment | 2022 | 2023 |
|---|---|---|
| North America | 1,200 | 1,500 |
| International | 900 | 1,100 |
| Cloud | 400 | 700 |"""
STAFF = """| Segment | Employees | Stores |
|---|---|---|
| North America | 5,000 | 40 |
| International | 3,000 | 25 |
| Cloud | 800 | 2 |"""
REGIONS = """| Segment | 2023 | 2024 |
|---|---|---|
| North America | 300 | 350 |
| Cloud | 200 | 260 |
| Europe | 90 | 95 |"""


def test_table_questions_of_every_kind_the_writer_claims():
    w = OracleWriter({}, LABELS)
    a = _region(GOOD, "pew", 9, title="Cell Phone Ownership")
    single = w.write_sync(Attempt(1, Evidence("single", (a,)), "extraction"))
    assert single.question.startswith("In the Cell Phone Ownership table in \u201cOlder Adults Online\u201d (2014), "
                                      "what is the ")
    # the same table with no printed title names no table a reader could find: no question
    untitled = w.write_sync(Attempt(1, Evidence("single", (_region(GOOD, "pew", 9, title=""),)), "extraction"))
    assert isinstance(untitled, Rejected) and untitled.reason == "untitled_table"
    assert (single.answer, single.answer_format) in {("84", "Str"), ("21", "Str"), ("84%", "Str"), ("29%", "Str")}
    logic = w.write_sync(Attempt(2, Evidence("single", (a,)), "logic"))
    assert isinstance(logic, Rejected) or logic.answer in {"65-69", "70-74"}
    # a document without a readable name gives no question: it could not say which document it means
    nameless = OracleWriter({}, {}).write_sync(Attempt(1, Evidence("single", (a,)), "extraction"))
    assert isinstance(nameless, Rejected) and nameless.reason == "unnamed_document"


def test_bridge_question_finds_the_row_in_one_table_and_reads_it_in_the_other():
    w = OracleWriter({}, LABELS)
    seg, staff = _region(SEGMENTS, "report", 9), _region(STAFF, "report", 12)
    for i in range(6):
        out = w.write_sync(Attempt(i, Evidence("multi_page", (seg, staff)), "extraction"))
        # North America is the highest in both years (1,500 > 1,100 > 700; 1,200 > 900 > 400): its staff row
        assert out.answer in {"5,000", "40"} and "North America" not in out.question
        assert "Acme Corp" in out.question and len(out.hops) == 2
        assert (out.hops[0].answer, out.hops[0].region, out.hops[1].region) == ("North America", 0, 1)
        assert out.hops[1].answer == out.answer and out.cells[1][1] == "North America"
    # tables without a row label in common have no bridge
    other = STAFF.replace("North America", "Oceania").replace("International", "Africa").replace("Cloud", "Arctic")
    none = w.write_sync(Attempt(0, Evidence("multi_page", (seg, _region(other, "report", 20))), "extraction"))
    assert isinstance(none, Rejected) and none.reason == "writer_declined"


def test_difference_and_ratio_use_a_column_both_tables_share():
    w = OracleWriter({}, LABELS)
    # two tables of what one filing measures (revenue by segment, revenue by region): the same row is one line
    seg, regions = _region(SEGMENTS, "report", 9, "Segment Revenue"), _region(REGIONS, "report", 4, "Regional Revenue")
    # the shared column is 2023, the shared rows North America and Cloud (International and Europe are in one table)
    a_2023 = {"North America": 1500, "Cloud": 700}
    b_2023 = {"North America": 300, "Cloud": 200}
    seen = set()
    for i in range(16):
        out = w.write_sync(Attempt(i, Evidence("multi_page", (seg, regions)), "logic"))
        assert "Acme Corp" in out.question and "the 2023 value of" in out.question
        ra = rb = next(r for r in a_2023 if r in out.question)
        assert "International" not in out.question and "Europe" not in out.question
        if out.question.startswith("What is the ratio"):
            assert out.answer == f"{a_2023[ra] / b_2023[rb]:.2f}" and out.answer_format == "Float"
            seen.add("ratio")
        else:
            assert "minus" in out.question and out.answer == f"{a_2023[ra] - b_2023[rb]:,}" and out.answer_format == "Int"
            seen.add("difference")
        assert [h.answer for h in out.hops] == [f"{a_2023[ra]:,}", str(b_2023[rb])]
    assert seen == {"ratio", "difference"}
    # across two filings money is stated in each one's own scale (thousands, millions): no arithmetic on it
    other = w.write_sync(Attempt(0, Evidence("cross_doc", (seg, _region(REGIONS, "zen", 4))), "logic"))
    assert isinstance(other, Rejected) and other.reason == "writer_declined"
    # tables with no column in common: nothing to compute
    refused = w.write_sync(Attempt(0, Evidence("multi_page", (seg, _region(STAFF, "report", 12))), "logic"))
    assert isinstance(refused, Rejected) and refused.reason == "writer_declined"


def test_compare_uses_one_unit_and_skips_totals():
    text = """| Item | 2023 |
|---|---|
| Advertising expense | $ 120 |
| Gross margin | 31.0 % |
| Rent expense | $ 300 |
| Total expenses | $ 9,000 |"""
    w = OracleWriter({}, LABELS)
    for i in range(20):
        out = w.write_sync(Attempt(i, Evidence("single", (_region(text),)), "logic"))
        assert not isinstance(out, Rejected)
        # the margin (a share) is never compared with dollars, the total never with its parts
        assert out.question.endswith(("Advertising expense or Rent expense?", "Rent expense or Advertising expense?"))
        assert out.answer == "Rent expense"
    # net sales against operating income: a result line against the line it is computed from answers itself
    results = text.replace("Advertising expense", "Net sales").replace("Rent expense", "Operating income")
    outs = [w.write_sync(Attempt(i, Evidence("single", (_region(results),)), "logic")) for i in range(8)]
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


@pytest.mark.slow
def test_a_shortfall_is_reported_and_below_the_floor_fails(tmp_path: Path):
    ws = qgen_workspace(tmp_path / "ws")
    cfg = tmp_path / "few.yaml"
    cfg.write_text(yaml.safe_dump({"tasks": {"generate": {"max_attempts": 6}}}))
    r = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--n", "20", "--config", str(cfg)])
    assert r.exit_code == 3, r.output
    err = " ".join(r.output.split())
    assert "short of --n 20 by" in err and "below the floor of 80% of --n" in err and "largest causes" in err
    # the rows it did keep are stored and counted as stored
    kept = int(err.split("kept ", 1)[1].split(" ", 1)[0])
    assert f"{kept} tasks in" in err and 0 < kept < 16
    ok = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--n", "20", "--config", str(cfg), "--min-share", "0"])
    assert ok.exit_code == 0 and "warning: short of --n 20" in " ".join(ok.output.split())


def test_answers_are_read_again_from_their_cell():
    from vrag_data.qgen.evidence import Evidence
    from vrag_data.qgen.verify import reread_cells
    from vrag_data.qgen.writer import Written

    attempt = Attempt(0, Evidence("single", (_region(GOOD),)), "extraction")
    right = Written("q", "21", "Str", "extraction", ("21",), "oracle", ((0, "70-74", "Smartphone", "21"),))
    assert reread_cells(attempt, right) == ""
    # the same number claimed under the neighbouring column (the wrong-column gold of a shifted table)
    wrong = Written("q", "21", "Str", "extraction", ("21",), "oracle", ((0, "70-74", "Cell phone", "21"),))
    assert reread_cells(attempt, wrong) == "cell ('70-74', 'Cell phone') holds '84', not '21'"
    # a duplicated row label names no single cell
    dup = Written("q", "80", "Str", "extraction", ("80",), "oracle", ((0, "Some college", "Cell phone", "80"),))
    assert "holds None" in reread_cells(attempt, dup)


def test_garbled_headers_and_split_ranges_give_no_question():
    smeared = """| ($ million) | Year Ended June 30, 2023 Rigid Flexibles | Year Ended June 30, 2023 Rigid Packaging | Year Ended June 30, 2023 Rigid Total |
|---|---|---|---|
| Adjusted EBIT | 1,000 | 250 | 1,250 |"""
    cut = """| Obligations | Payments Less than Total | Payments Less than 1 year |
|---|---|---|
| Debt | 3,400 | 130 |"""
    split_range = """| Assumptions | 2021 | | |
|---|---|---|---|
| Risk-free interest rate | 0.1 % | - | 0.9 % |
| Dividend yield | | | 2.9 % |"""
    assert "smeared" in table_grid(smeared).problem and "smeared" in table_grid(cut).problem
    assert "unnamed columns" in table_grid(split_range).problem
    # the rest of a row label pushed into a column of numbers: that row is dropped, the others kept
    label_cut = """| Item | 2023 | 2022 |
|---|---|---|
| Net sales | 2,777 | 2,967 |
| Comparable Currency | Growth % | (5) |
| Operating income | 300 | 280 |"""
    assert {r for r, _, _ in table_grid(label_cut).cells} == {"Net sales", "Operating income"}
    signatures = "| Signature | Title |\n|---|---|\n| /S/ | Director |\n| Jane Roe | Chief Executive Officer |"
    assert {r for r, _, _ in table_grid(signatures).cells} == {"Jane Roe"}  # a signature mark is no row label
