"""Table structure from word geometry: stacked tables stay two, multi-row headers become column names, wrapped
labels stay one row, tables of contents are set aside. Generated PDFs through real PyMuPDF, plus one real 10-K
page of the shared corpus (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrag_data.ingest.render import import_pymupdf
from vrag_data.ingest.tables import is_value, tables_in_region
from vrag_data.ingest.textlayer import extract_text_layer

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "docs"


def _page_words(lines: list[tuple[float, float, str]]) -> tuple[list, tuple[float, float, float, float]]:
    """Words of a one-page PDF with text drawn at (x, y baseline): what the ingest worker reads."""
    pymupdf = import_pymupdf(layout=False)
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for x, y, text in lines:
        page.insert_text((x, y), text, fontsize=9, fontname="helv")
    words = extract_text_layer(page, want_words=True).words
    doc.close()
    return words, (30.0, 40.0, 600.0, 760.0)


def _cells(table) -> dict[tuple[str, str], str]:  # noqa: ANN001
    return {(r[0], table.header[j]): r[j] for r in table.rows for j in range(1, len(r)) if r[j]}


STACKED = [
    (300, 60, "Year Ended December 31,"),
    (260, 74, "2018"), (340, 74, "2017"), (420, 74, "2016"),
    (40, 90, "Product claims"), (262, 90, "204"), (342, 90, "198"), (422, 90, "176"),
    (40, 104, "Environmental"), (262, 104, "57"), (342, 104, "61"), (422, 104, "40"),
    # the second table, right under the first: two years only
    (285, 130, "December 31,"),  # centred over its two columns, as printed titles are
    (260, 144, "2018"), (340, 144, "2017"),
    (40, 160, "Receivables"), (262, 160, "812"), (342, 160, "745"),
    (40, 174, "Average monthly revenue per"),
    (40, 186, "paying member"), (262, 186, "9.10"), (342, 186, "8.75"),
]


def test_two_stacked_tables_stay_two_with_merged_headers():
    words, rect = _page_words(STACKED)
    tables = tables_in_region(words, rect)
    assert [t.kind for t in tables] == ["data", "data"]
    first, second = tables
    assert first.header == ["", "Year Ended December 31, 2018", "Year Ended December 31, 2017",
                            "Year Ended December 31, 2016"]
    assert _cells(first)[("Product claims", "Year Ended December 31, 2016")] == "176"
    assert second.header == ["", "December 31, 2018", "December 31, 2017"]
    cells = _cells(second)
    assert cells[("Receivables", "December 31, 2017")] == "745"  # not shifted into a column that does not exist
    # the wrapped label is one row, holding its values
    assert cells[("Average monthly revenue per paying member", "December 31, 2018")] == "9.10"
    assert len(second.rows) == 2


def test_table_of_contents_is_not_data():
    toc = [(500, 60, "Page"), (40, 80, "Item 1."), (100, 80, "Business"), (520, 80, "3"),
           (40, 94, "Item 1A."), (100, 94, "Risk Factors"), (520, 94, "9"),
           (40, 108, "Item 2."), (100, 108, "Properties"), (520, 108, "19"),
           (40, 122, "Item 7."), (100, 122, "Management's Discussion"), (520, 122, "22")]
    words, rect = _page_words(toc)
    assert [t.kind for t in tables_in_region(words, rect)] == ["toc"]


def test_values_and_years():
    assert is_value("$ 4,180,339") and is_value("(26)%") and is_value("12.3")
    assert not is_value("2015") and not is_value("FY2023") and not is_value("Revenue")


@pytest.mark.skipif(not (CORPUS / "NETFLIX_2015_10K.pdf").is_file(), reason="shared corpus not beside the repo")
def test_real_10k_page_header_rows_become_column_names():
    pymupdf = import_pymupdf(layout=False)
    doc = pymupdf.open(str(CORPUS / "NETFLIX_2015_10K.pdf"))
    page = doc[20]  # page 21: a 3-year table with a "Change" group, header over three lines
    words = extract_text_layer(page, want_words=True).words
    doc.close()
    rect = (0.0, 85.0, 612.0, 305.0)  # the table region the layout model draws
    (table,) = tables_in_region(words, rect)
    cells = _cells(table)
    assert cells[("Revenues", "As of/ Year Ended December 31, 2015")] == "$ 4,180,339"
    assert cells[("Net additions", "Change 2015 vs. 2014")] == "(70)"
    assert cells[("Cost of revenues", "Change 2014 vs. 2013 (%)")] == "18 %"


def test_a_name_over_its_own_column_names_no_other_and_split_words_rejoin():
    # three names each printed over its own column, "Total" only on the line below: "Intl Ops" must not be
    # glued into "Total"; "World-" / "wide" is one word hyphenated over two header lines
    words, rect = _page_words([
        (250, 60, "Home"), (330, 60, "Abroad"), (405, 60, "Intl Ops"), (478, 60, "World-"),
        (250, 72, "Segment"), (330, 72, "Segment"), (405, 72, "Segment"), (480, 72, "wide"), (530, 72, "Total"),
        (40, 90, "Balance at start"), (250, 90, "$ 1,300"), (330, 90, "$ 2,700"), (405, 90, "$ 1,300"),
        (478, 90, "$ 5,300"), (530, 90, "9,999"),
        (40, 104, "Acquisition"), (250, 104, "934,000"), (330, 104, "12,000"), (405, 104, "16,000"),
        (478, 104, "962,000"), (530, 104, "1,000"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["Home Segment", "Abroad Segment", "Intl Ops Segment", "Worldwide", "Total"]


def test_a_lone_header_word_inside_one_column_names_that_column_only():
    # "July 2," left-aligned over a column that its "$" signs widen: the first column's name, not both columns'
    words, rect = _page_words([
        (266, 60, "July 2,"),
        (272, 72, "2023"), (330, 72, "December 31, 2022"),
        (40, 90, "Equity securities"), (200, 90, "$"), (262, 90, "117,639"), (310, 90, "$"), (362, 90, "1,588"),
        (40, 104, "Debt securities"), (262, 104, "124,091"), (362, 104, "18,743"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["July 2, 2023", "December 31, 2022"]


def test_a_narrow_title_centred_over_all_columns_names_them_all():
    # "2022" centred over three quarters: it lies inside the middle column, yet it is every column's year
    words, rect = _page_words([
        (289, 60, "2022"),
        (250, 72, "Q1"), (290, 72, "Q2"), (330, 72, "Q3"),
        (40, 90, "Net earnings"), (244, 90, "14,571"), (284, 90, "14,262"), (324, 90, "14,310"),
        (40, 104, "Tax costs"), (244, 104, "11,014"), (284, 104, "10,995"), (324, 104, "10,958"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["2022 Q1", "2022 Q2", "2022 Q3"]


def test_a_one_line_name_above_takes_no_words_from_the_column_beside_it():
    # "Total" printed on the top line over its own column; "Bonus / Commission" below, over the next column but
    # wider than it: the words belong to that column, not to the complete "Total"
    words, rect = _page_words([
        (252, 60, "Base"), (412, 60, "Total"), (492, 60, "Sitting"),
        (252, 72, "Pay"), (322, 72, "Bonus /"), (492, 72, "Fees"),
        (318, 84, "Commission"),
        (40, 100, "First director"), (250, 100, "1,204.00"), (330, 100, "28.51"), (410, 100, "436.51"),
        (490, 100, "1,214.00"),
        (40, 114, "Second director"), (250, 114, "1,194.50"), (330, 114, "21.10"), (410, 114, "195.93"),
        (490, 114, "1,212.00"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["Base Pay", "Bonus / Commission", "Total", "Sitting Fees"]


def test_header_words_stacked_over_a_column_name_only_that_column():
    # fourth hand check: "Gross" / "Unrealized" stacked over "Losses", "Estimated" / "Fair" over "Value"; the "Cost"
    # column beside them has a one-line name and takes none of their words; "Defense, Space" over "& Security"
    # is no part of the "Global Services" beside it
    words, rect = _page_words([
        (300, 60, "Gross"), (360, 60, "Estimated"),
        (290, 72, "Unrealized"), (372, 72, "Fair"),
        (40, 84, "Description"), (240, 84, "Cost"), (300, 84, "Losses"), (366, 84, "Value"),
        (40, 100, "State bonds"), (240, 100, "64"), (306, 100, "(10)"), (372, 100, "54"),
        (40, 114, "Treasury notes"), (234, 114, "3,859"), (306, 114, "(73)"), (366, 114, "3,786"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["Cost", "Gross Unrealized Losses", "Estimated Fair Value"]
    words, rect = _page_words([
        (230, 60, "Commercial"), (300, 60, "Defense, Space"),
        (236, 72, "Airplanes"), (316, 72, "& Security"), (380, 72, "Global Services"), (470, 72, "Total"),
        (40, 90, "Balance at start"), (240, 90, "$1,316"), (320, 90, "$3,224"), (400, 90, "$3,454"),
        (470, 90, "$8,081"),
        (40, 104, "Balance at end"), (240, 104, "$1,316"), (320, 104, "$3,224"), (400, 104, "$3,443"),
        (470, 104, "$8,068"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["Commercial Airplanes", "Defense, Space & Security", "Global Services", "Total"]


def test_a_group_title_stacked_over_a_group_names_that_group_only():
    # "Notional" over "amounts (1)" (a group of two year columns; the footnote mark is no date); "Other assets" has
    # no word above it
    words, rect = _page_words([
        (262, 60, "Notional"), (460, 60, "Accrued"),
        (262, 72, "amounts (1)"), (360, 72, "Other assets"), (456, 72, "liabilities"),
        (240, 84, "2022"), (290, 84, "2021"), (340, 84, "2022"), (390, 84, "2021"), (440, 84, "2022"),
        (490, 84, "2021"),
        (40, 100, "Foreign exchange"), (240, 100, "1,200"), (290, 100, "1,300"), (340, 100, "45"), (390, 100, "28"),
        (440, 100, "(74)"), (490, 100, "(80)"),
        (40, 114, "Commodity swaps"), (240, 114, "3,091"), (290, 114, "2,951"), (340, 114, "100"), (390, 114, "100"),
        (440, 114, "(100)"), (490, 114, "—"),
    ])
    (table,) = tables_in_region(words, rect)
    assert table.header[1:] == ["Notional amounts (1) 2022", "Notional amounts (1) 2021", "Other assets 2022",
                                "Other assets 2021", "Accrued liabilities 2022", "Accrued liabilities 2021"]


def test_a_word_spread_as_a_title_passes_no_words_up_to_other_columns():
    # a guard on the stacking rule (passes on the code before it too): "(% points)" under "Reduction" only; the
    # nearest-column rule also gives it to the two columns left of it,
    # but "Average Rate" stacked over "Reduction" names the Reduction column only
    words, rect = _page_words([
        (430, 60, "Average Rate"),
        (240, 72, "Number of Accounts"), (340, 72, "Account Balances"), (445, 72, "Reduction"),
        (442, 84, "(% points)"),
        (40, 100, "Card Member loans"), (270, 100, "120"), (370, 100, "1,042"), (460, 100, "12.3"),
        (40, 114, "Card Member receivables"), (270, 114, "30"), (370, 114, "150"), (460, 114, "9.9"),
    ])
    (table,) = tables_in_region(words, rect)
    assert not any("Average" in h or "Reduction" in h for h in table.header[1:3])
    assert table.header[3] == "Average Rate Reduction (% points)"
