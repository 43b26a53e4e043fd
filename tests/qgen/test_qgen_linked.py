"""Issue 41, linked questions: two pages of one document are paired by an entity their tables share (found over the
whole document, not by a random pair of regions), and a linked question names what each table measures (its
printed title and unit). Small synthetic tables and page texts."""

from __future__ import annotations

import random

from tests.qgen.test_qgen_tables_named import _region
from vrag_data.qgen.evidence import EvidencePool, Region
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.writer import Attempt, Written
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Page

LABELS = {"acme": "the Form 10-K of Acme Corp for fiscal year 2022"}
REVENUE = """| Segment | 2022 | 2021 |
|---|---|---|
| Las Vegas Strip | 8,404 | 5,444 |
| Regional Operations | 3,560 | 3,322 |"""
REVENUE_PAGE = "Net Revenues By Segment\n(In millions)\nLas Vegas Strip\n8,404\n5,444\nRegional Operations\n3,560\n3,322"
EBITDA = """| Segment | 2022 | 2021 |
|---|---|---|
| Las Vegas Strip | 3,161 | 2,278 |
| Regional Operations | 1,153 | 1,208 |"""
EBITDA_PAGE = "Adjusted Property Ebitdar By Segment\n(In millions)\nLas Vegas Strip\n3,161\n2,278\nRegional Operations\n1,153\n1,208"


def _text_region(page: int) -> Region:
    pg = Page(page_id=f"acme_{page}", doc_id="sha_acme", stem="acme", page=page, image=f"pages/acme_{page}.jpg",
              width=1000, height=1400, dpi=144, text="Our business grew in every market we serve.")
    block = LayoutBlock(block_id=f"acme_{page}#0", doc_id="sha_acme", page_id=pg.page_id, page=page, cls="text",
                        bbox=Box.from_raw((50, 50, 900, 300), 1000, 1400), text=pg.text, source="pymupdf")
    return Region(block, pg, "text")


def test_pages_are_paired_by_an_entity_their_tables_share():
    # a long document: twenty text passages and two tables, on pages 9 and 31, that list the same segments
    regions = [_text_region(p) for p in range(1, 21)]
    revenue, ebitda = _region(REVENUE, REVENUE_PAGE, page=9), _region(EBITDA, EBITDA_PAGE, page=31)
    pool = EvidencePool({"acme": sorted([*regions, revenue, ebitda], key=lambda r: r.page.page)})
    picks = [pool.pick("multi_page", random.Random(f"t:{i}")) for i in range(200)]
    both = sum({r.page_id for r in ev.regions} == {"acme_9", "acme_31"} for ev in picks if ev is not None)
    # half of the picks come from the document's links, a few more by chance: far more than a random pairing gives
    assert both >= 80, both


def test_a_linked_question_names_what_each_table_measures():
    pair = (_region(REVENUE, REVENUE_PAGE, page=9), _region(EBITDA, EBITDA_PAGE, page=31))
    w = OracleWriter({}, LABELS)
    outs = [w.write_sync(Attempt(i, Evidence("multi_page", pair), "logic")) for i in range(8)]
    outs = [o for o in outs if isinstance(o, Written)]
    assert outs
    for o in outs:
        assert "the Net Revenues By Segment table (in millions)" in o.question, o.question
        assert "the Adjusted Property Ebitdar By Segment table (in millions)" in o.question, o.question
    # hand-computed: 2022 Las Vegas Strip revenue minus its Adjusted Property EBITDAR, 8,404 - 3,161
    diffs = {o.answer for o in outs if "minus" in o.question and "2022 value of Las Vegas Strip" in o.question}
    assert diffs <= {"5,243", "-5,243"}, diffs
