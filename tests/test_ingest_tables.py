"""Table structure from word geometry: stacked tables stay two, multi-row headers become column names, wrapped
labels stay one row, tables of contents are set aside. Generated PDFs through real PyMuPDF, plus one real 10-K
page of the shared corpus (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrag_data.ingest.render import import_pymupdf
from vrag_data.ingest.tables import is_value, tables_in_region
from vrag_data.ingest.textlayer import extract_text_layer

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "docs"


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
