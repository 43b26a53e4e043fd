"""Issue 41, tables named by what they measure: a question names a table by the title printed above it and the scale
of its amounts (not by its column headers), compares no part with its total and no basic with diluted figure, and
the verifier re-reads each cell from the page's own words, refusing a value the table rebuild glued from several
cells or took from another row. Small synthetic tables and page texts."""

from __future__ import annotations

import asyncio

from vrag_data.qgen.evidence import Evidence, Region
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.verify import Verifier
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Page

LABELS = {"acme": "the Form 10-K of Acme Corp for fiscal year 2022"}
OPS = """| Item | 2022 | 2021 |
|---|---|---|
| Casino | 1,548 | 1,527 |
| Rooms | 897 | 636 |"""
# the page's own words as a block-wise text layer prints them: label, then one value a line
OPS_PAGE = """ACME CORP AND SUBSIDIARIES
CONSOLIDATED STATEMENTS OF OPERATIONS
(In millions)
2022
2021
Casino
$ 1,548
$ 1,527
Rooms
897
636"""


def _region(md: str, page_text: str, stem: str = "acme", page: int = 4) -> Region:
    pg = Page(page_id=f"{stem}_{page}", doc_id=f"sha_{stem}", stem=stem, page=page, image=f"pages/{stem}_{page}.jpg",
              width=1000, height=1400, dpi=144, text=page_text, text_source="text_layer")
    block = LayoutBlock(block_id=f"{pg.page_id}#0", doc_id=pg.doc_id, page_id=pg.page_id, page=page, cls="table",
                        bbox=Box.from_raw((50, 50, 900, 600), 1000, 1400), text=md, source="pymupdf")
    return Region(block, pg, "table")


def _writes(region: Region, qtype: str, n: int = 6) -> list:
    w = OracleWriter({}, LABELS)
    return [w.write_sync(Attempt(i, Evidence("single", (region,)), qtype)) for i in range(n)]


def test_a_table_is_named_by_its_printed_title_and_unit_not_by_its_columns():
    outs = [o for o in _writes(_region(OPS, OPS_PAGE), "extraction") if isinstance(o, Written)]
    assert outs
    for o in outs:
        assert o.question.startswith("In the Consolidated Statements of Operations table (in millions) in the Form "
                                     "10-K of Acme Corp"), o.question
        assert "with the columns" not in o.question
    # no title printed above the table: a list of its column headers names no table a reader would look for
    untitled = _writes(_region(OPS, "Casino\n1,548\n1,527\nRooms\n897\n636"), "extraction")
    assert untitled and all(isinstance(o, Rejected) and o.reason == "untitled_table" for o in untitled)


def test_no_comparison_of_a_part_with_its_total_or_of_basic_with_diluted():
    eps = """| Item | 2022 | 2021 |
|---|---|---|
| Basic earnings per share | 4.10 | 3.20 |
| Diluted earnings per share | 4.05 | 3.18 |
| Net sales | 900 | 800 |
| Net sales, total | 1,900 | 1,700 |"""
    outs = _writes(_region(eps, "Selected Financial Data\nBasic earnings per share\n4.10\n3.20"), "logic", 12)
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs), [
        getattr(o, "question", o) for o in outs]


def _verify(region: Region, row: str, col: str, value: str) -> object:
    w = Written(f"In the table, what is the {col} value of {row}?", value, "Str", "extraction", (value,), "oracle",
                ((0, row, col, value),))
    verifier = Verifier({region.page.page_id: region.page}, None, None)
    return asyncio.run(verifier.verify(Attempt(0, Evidence("single", (region,)), "extraction"), w))


def test_the_verifier_rereads_the_cell_from_the_page_words():
    ok = _verify(_region(OPS, OPS_PAGE), "Rooms", "2021", "636")
    assert not isinstance(ok, Rejected), ok
    # the rebuilt grid glued two printed cells into one value: no single cell of the page holds "897 636"
    glued = OPS.replace("| Rooms | 897 | 636 |", "| Rooms | 897 636 | |").replace("| Casino | 1,548 | 1,527 |",
                                                                                  "| Casino | 1,548 1,527 | |")
    bad = _verify(_region(glued, OPS_PAGE), "Rooms", "2022", "897 636")
    assert isinstance(bad, Rejected) and bad.reason == "cell_not_on_page", bad
    # the grid put Casino's number on the Rooms row (a row shifted by the rebuild): the page prints it elsewhere
    shifted = OPS.replace("| Rooms | 897 | 636 |", "| Rooms | 1,527 | 636 |")
    bad = _verify(_region(shifted, OPS_PAGE), "Rooms", "2022", "1,527")
    assert isinstance(bad, Rejected) and bad.reason == "cell_not_on_page", bad
