"""Table questions, rules found by the third hand check (10 unseen PDFs): a list of numbers is no number, a column of
units keeps rows of different units apart, tables told apart only by a typo are described alike, "the highest row"
sees rows not asked about, arithmetic pairs one period and one line, and record-like tables without row labels are
refused. Small synthetic tables only."""

from __future__ import annotations

from tests.qgen.test_qgen_tables import LABELS, _region
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.columns import same_columns
from vrag_data.qgen.cells import clean_name, clean_value, number
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.table_hops import _same_period
from vrag_data.qgen.writer import Attempt, Rejected

DATASETS = """| Dataset | Test Size | #Opts |
|---|---|---|
| Alpha | 500 | 2 |
| Beta | 204 | 3,5,7 |
| Gamma | 230 | 5 |"""
SCORES = """| Dataset | Model A | Model B |
|---|---|---|
| Alpha | 61.0 | 70.5 |
| Beta | 40.0 | 42.3 |
| Gamma | 20.1 | 25.4 |"""

TIMING = """| Symbol | Parameter | Min | Max | {units} |
|---|---|---|---|---|
| VPP | Supply Voltage | 20.5 | 21.5 | V |
| IPP | Supply Current | 5 | 30 | mA |
| TPW | Pulse Width | 45 | 55 | ms |
| TSU | Setup Time | 48 | 60 | ms |"""


def _writes(regions: tuple, kind: str, qtype: str, n: int = 12) -> list:
    w = OracleWriter({}, LABELS)
    return [w.write_sync(Attempt(i, Evidence(kind, regions), qtype)) for i in range(n)]


def test_a_list_of_numbers_is_no_number_and_never_the_highest():
    assert number("3,5,7") is None and number("1,234") == 1234 and number("12,345.5") == 12345.5
    opts = table_grid(DATASETS)
    # text in a column of numbers: the row is not asked about, its numbers kept apart for "the highest"
    assert ("Beta", "Test Size", "204") in opts.dropped and all(r != "Beta" for r, _, _ in opts.cells)
    regions = (_region(DATASETS, "report", 14), _region(SCORES, "report", 7))
    for out in _writes(regions, "multi_page", "extraction"):
        # "3,5,7" options is not 357, nor less than 5: the highest #Opts is not known; the highest Test Size is Alpha's
        assert isinstance(out, Rejected) or (out.hops[0].answer == "Alpha" and "#Opts value" not in out.question)


def test_rows_of_a_units_column_are_compared_only_within_their_unit():
    grid = table_grid(TIMING.format(units="Units"))
    assert grid.units == {"VPP": "V", "IPP": "mA", "TPW": "ms", "TSU": "ms"}
    assert grid.unit("45", "TPW") == grid.unit("48", "TSU") != grid.unit("5", "IPP")
    # found by its content too, whatever the header says (a text layer's "Unita")
    assert table_grid(TIMING.format(units="Unita")).units["VPP"] == "V"
    region = _region(TIMING.format(units="Units"), "report", 15)
    for out in _writes((region,), "single", "logic"):
        assert isinstance(out, Rejected) or set(out.question.split(": ")[1].rstrip("?").split(" or ")) == {"TPW", "TSU"}


def test_tables_told_apart_only_by_a_typo_are_described_alike():
    assert same_columns(["Parameter", "Min", "Max", "Unita"], ["Parameter", "Min", "Max", "Units"])
    assert not same_columns(["2023", "2022"], ["2023", "2021"]) and not same_columns(["Min", "Max"], ["Min", "Mix"])
    first, second = (_region(TIMING.format(units=u), "report", p) for u, p in (("Unita", 15), ("Units", 20)))
    for out in _writes((first, second), "multi_page", "logic", 4) + _writes((first, second), "multi_page", "extraction", 4):
        assert isinstance(out, Rejected) and out.reason == "writer_declined"


def test_the_highest_row_counts_rows_not_asked_about():
    long_label = "Increased revenues from a product largely driven by demand in one region in the first quarter"
    costs = f"""| Driver | Six Months 2023 |
|---|---|
| Product launches | 8 |
| Other factors, net | (19) |
| {long_label} | 114 |"""
    staff = """| Driver | Three Months 2023 |
|---|---|
| Product launches | 324 |
| Other factors, net | 62 |"""
    grid = table_grid(costs)
    assert {r for r, _, _ in grid.cells} == {"Product launches", "Other factors, net"}
    assert (long_label, "Six Months 2023", "114") in grid.dropped
    outs = _writes((_region(costs, "report", 46), _region(staff, "report", 45)), "multi_page", "extraction")
    # 114 (a row too long to ask about) is the highest: "Product launches" (8) is not, so no bridge from that column;
    # the other way round (the highest of the second table, read in the first) still is one
    assert all(isinstance(o, Rejected) or o.hops[0].region == 1 for o in outs)
    assert any(not isinstance(o, Rejected) for o in outs)


def test_arithmetic_pairs_one_period_and_one_specific_line():
    assert _same_period("2015", "Year ended December 31, 2015")
    assert not _same_period("Six Months Ended July 2, 2023 Worldwide", "Three Months Ended July 2, 2023 U.S.")
    six = """| Driver | Six Months Ended July 2, 2023 Worldwide | Six Months Ended July 2, 2023 U.S. |
|---|---|---|
| Product launches | 561 | 553 |
| Price effects | (120) | (80) |"""
    three = six.replace("Six Months", "Three Months").replace("561", "324").replace("553", "319")
    outs = _writes((_region(six, "report", 46), _region(three, "report", 45)), "multi_page", "logic", 6)
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)
    # "Total" of an income-tax table and of a fair-value table are two different lines
    taxes = "| Item | 2021 | 2020 |\n|---|---|---|\n| Domestic | 4,931 | 4,204 |\n| Total | 6,680 | 5,367 |"
    fair = "| Item | Level 2 2021 | Level 2 2020 |\n|---|---|---|\n| Contracts | 17 | 1 |\n| Total | 408 | 488 |"
    outs = _writes((_region(taxes, "report", 57), _region(fair, "report", 51)), "multi_page", "logic", 6)
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


def test_records_without_row_labels_and_cut_hyphenated_names_give_no_question():
    records = """| Segment | Revenues | Region | July 2, 2023 | July 3, 2022 |
|---|---|---|---|---|
|  | $316 |  |  |  |
|  |  | U.S. | $ 90 | $ 86 |
|  | Flat | Intl | 225 | 230 |
| Business | (operationally) | Worldwide | $ 316 | $ 317 |"""
    assert "no row label" in table_grid(records).problem
    assert not clean_name("Six Months Ended Inter- U.S. July 3, 2022") and clean_name("Non-current assets")


def test_cells_cut_by_a_line_wrap_and_years_give_no_question():
    assert not clean_value("Executive Management Team,") and not clean_value("Discussed the new plan format and")
    assert not clean_value("Audit Committee.)") and clean_value("New York Stock Exchange") and clean_value("(1,013)")
    assert not clean_name("Net sales by") and clean_name("Net sales by region")
    approvals = """| Product | U.S. Approved | EU Approved |
|---|---|---|
| Widget One | 2020 | 2022 |
| Widget Two | 2021 | 2022 |
| Widget Three | 2019 | 2023 |"""
    for out in _writes((_region(approvals, "report", 54),), "single", "logic", 6):
        assert isinstance(out, Rejected) and out.reason == "writer_declined"  # "higher" years are dates, not amounts


def test_row_labels_equal_but_for_case_name_no_single_row():
    text = """| Item | Q4 |
|---|---|
| Net earnings from Continuing Operations | 3,227 |
| Net earnings from continuing operations | 5,432 |
| Sales to customers | 19,939 |"""
    assert {r for r, _, _ in table_grid(text).cells} == {"Sales to customers"}
