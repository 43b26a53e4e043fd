"""Linked multi-hop questions and document names: the readable name read from a first page, the check that a
question names its document, and the verifier's structure checks (each hop needed, one cell per name, per-hop rules)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.qgen.test_qgen_tables import LABELS, REGIONS, SEGMENTS, STAFF, _region, page_words
from vrag_data.qgen.docname import document_label, label_terms, readable_title
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.verify import Verifier, VerifyReport
from vrag_data.qgen.writer import Attempt, Hop, Rejected, Written, check_question
from vrag_data.schema.records import Document, Page

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "docs"

FILING = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-K
ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d)
For the fiscal year ended March 31, 2024
Commission File No. 000-00000
ZYLOX WIDGETS, INC.
(Exact name of registrant as specified in its charter)
Delaware"""


def test_document_label_from_a_filing_a_citation_and_a_title_block() -> None:
    assert document_label(FILING, "0000000000-24-000001") == (
        "the Form 10-K of Zylox Widgets, Inc. for the fiscal year ended March 31, 2024")
    report = "MAY 2, 2019 Gardens\nRECOMMENDED CITATION: Example Center, May 2019, \u201cCity Gardens and Their Users\u201d\n"
    assert document_label(report) == "\u201cCity Gardens and Their Users\u201d (2019)"
    # a paper: no metadata title, no citation line; the layout model's title block, hyphenation undone
    assert document_label("Some text\n", "", ["Learning to Pa-\nrse Tables", "x"]) == "\u201cLearning to Parse Tables\u201d"
    assert document_label("nothing here", "untitled.docx") == ""
    assert not readable_title("0001018724-18-000005") and readable_title("Acme Outlook 2023")
    assert label_terms("the Form 10-K of Amazon.com, Inc. for the fiscal year ended December 31, 2017") == {"amazon"}


@pytest.mark.skipif(not (CORPUS / "NETFLIX_2015_10K.pdf").exists(), reason="shared corpus not present (../shared/corpus)")
def test_document_label_of_a_real_10k_whose_title_is_an_accession_number() -> None:
    import pymupdf

    with pymupdf.open(CORPUS / "NETFLIX_2015_10K.pdf") as doc:
        assert not readable_title(doc.metadata["title"])
        label = document_label(doc[0].get_text(), doc.metadata["title"])
    assert label == "the Form 10-K of Netflix, Inc. for the fiscal year ended December 31, 2015"


DOC = Document(doc_id="d" * 64, stem="zw_10k_2024", source_path="/x/zw_10k_2024.pdf", kind="pdf", n_pages=3,
               n_bytes=1, title="0000000000-24-000001")
NAMES = {"zw_10k_2024": document_label(FILING)}


@pytest.mark.parametrize(("question", "reason"), [
    ("What was revenue in 2023, in USD millions?", "unnamed_document"),
    ("What was revenue in zw_10k_2024 for 2023?", "names_document"),
    ("What was Zylox Widgets' revenue in 2023, in USD millions?", None),
    ("In the Form 10-K of Zylox Widgets, Inc. for fiscal 2024, what was revenue?", None),
])
def test_a_question_names_its_document_but_not_its_file(question: str, reason: str | None) -> None:
    out = check_question(Written(question, "42", "Int", "extraction"), [DOC], [DOC], NAMES)
    assert (out.reason if isinstance(out, Rejected) else None) == reason


def _page(stem: str, page: int, tables: list[str]) -> Page:
    return Page(page_id=f"{stem}_{page}", doc_id=f"sha_{stem}", stem=stem, page=page, image=f"pages/{stem}_{page}.jpg",
                width=1000, height=1400, dpi=144, text="\n".join(tables), tables_md=tables)


def _verify(pages: list[Page], attempt: Attempt, w: Written) -> VerifyReport | Rejected:
    v = Verifier({p.page_id: p for p in pages}, None, None)
    return asyncio.run(v.verify(attempt, w))


def test_bridge_passes_every_hop_and_a_named_bridge_row_is_refused() -> None:
    seg, staff = _region(SEGMENTS, "report", 9), _region(STAFF, "report", 12)
    attempt = Attempt(0, Evidence("multi_page", (seg, staff)), "extraction")
    w = OracleWriter({}, LABELS).write_sync(attempt)
    pages = [_page("report", 9, [SEGMENTS]), _page("report", 12, [STAFF])]
    rep = _verify(pages, attempt, w)
    assert isinstance(rep, VerifyReport), rep
    assert {"hops", "hop1_answerable", "hop2_answerable", "hop1_closed_book", "same_table_elsewhere"} <= set(rep.checks)
    named = Written(w.question + " (North America)", w.answer, w.answer_format, w.reasoning_type, w.visible, w.writer,
                    w.cells, w.hops)
    out = _verify(pages, attempt, named)
    assert isinstance(out, Rejected) and out.reason == "hop_not_needed"


def test_a_computed_answer_printed_in_one_table_is_a_single_hop() -> None:
    seg, regions = _region(SEGMENTS, "report", 9), _region(REGIONS, "zen", 4)
    attempt = Attempt(0, Evidence("cross_doc", (seg, regions)), "logic")
    hops = (Hop("q1", "1,500", 0), Hop("q2", "300", 1))
    cells = ((0, "North America", "2023", "1,500"), (1, "North America", "2023", "300"))
    # 1,500 - 300 = 1,200, which the segments table prints (North America, 2022): one look-up would answer it
    w = Written("What is the 2023 value of North America minus the 2023 value of North America in Zen's table?", "1,200",
                "Int", "logic",
                ("1,500", "300"), "oracle", cells, hops)
    out = _verify([_page("report", 9, [SEGMENTS]), _page("zen", 4, [REGIONS])], attempt, w)
    assert isinstance(out, Rejected) and out.reason == "single_hop_suffices"


def test_a_hop_whose_value_is_not_in_its_own_region_is_refused() -> None:
    seg, staff = _region(SEGMENTS, "report", 9), _region(STAFF, "report", 12)
    attempt = Attempt(0, Evidence("multi_page", (seg, staff)), "extraction")
    # hop 2 claims 1,500 from the staff table: the whole question's values are all visible somewhere, the hop's not
    w = Written("In the Form 10-K of Acme Corp, one row has the highest 2023 value; what is its Stores value?", "40",
                "Str", "extraction", ("1,500", "40"), "oracle", (), (Hop("which row?", "North America", 0),
                                                                     Hop("its Stores value?", "1,500", 1)))
    out = _verify([_page("report", 9, [SEGMENTS]), _page("report", 12, [STAFF])], attempt, w)
    assert isinstance(out, Rejected) and out.reason == "not_answerable_from_evidence" and out.detail.startswith("hop2")


def test_the_same_table_on_another_page_with_another_value_is_ambiguous() -> None:
    seg = _region(SEGMENTS, "report", 9)
    attempt = Attempt(0, Evidence("single", (seg,)), "extraction")
    w = Written("In the table with the columns 2022, 2023 in Acme Corp's 10-K, what is the 2023 value of Cloud?", "700",
                "Str", "extraction", ("700",), "oracle", ((0, "Cloud", "2023", "700"),))
    restated = SEGMENTS.replace("| 400 | 700 |", "| 400 | 650 |")  # a later page restates the same table
    out = _verify([_page("report", 9, [SEGMENTS]), _page("report", 30, [restated])], attempt, w)
    assert isinstance(out, Rejected) and out.reason == "ambiguous" and "report_30" in out.detail
    # the same table repeated with the same value names one answer
    rep = _verify([_page("report", 9, [SEGMENTS]), _page("report", 30, [SEGMENTS])], attempt, w)
    assert isinstance(rep, VerifyReport), rep


def test_a_which_row_hop_needs_the_only_table_of_its_columns() -> None:
    seg, staff = _region(SEGMENTS, "report", 9), _region(STAFF, "report", 12)
    attempt = Attempt(0, Evidence("multi_page", (seg, staff)), "extraction")
    w = OracleWriter({}, LABELS).write_sync(attempt)
    # another table of the same document printed under the same title (other rows): "which row has the highest
    # 2023 value in the <title> table" no longer names one table
    other = "| Product | 2022 | 2023 |\n|---|---|---|\n| Widgets | 9,000 | 9,500 |\n| Gadgets | 10 | 12 |"
    twin = _page("report", 40, [other])
    twin.text = page_words(seg.page.text.splitlines()[0], other)
    pages = [_page("report", 9, [SEGMENTS]), _page("report", 12, [STAFF]), twin]
    out = _verify(pages, attempt, w)
    assert isinstance(out, Rejected) and out.reason == "ambiguous" and "report_40" in out.detail
