"""BM25 index: ranking, document scope, persistence and change detection, CLI messages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.retrieve import BM25Index, UnknownDocument, build_index, load_index
from vrag_data.schema.records import Document, Page
from vrag_data.store import Workspace, write_records

DOCS = {
    "acme_2019_10k": [
        "ACME Corporation annual report 2019. Letter to shareholders.",
        "Net revenue increased 12% to $4.2 billion driven by widget sales in Europe.",
        "Risk factors: supply chain disruption, currency exchange rates.",
        "",  # a scanned page: the words only exist in its OCR text
    ],
    "zeta_brochure": [
        "Zeta Graduate Studies brochure. Professional learning for teachers.",
        "Tuition and fees for the part-time programme. Scholarships are available.",
        "Campus map and contact details. Revenue of the campus bookstore.",
    ],
}
OCR = {("acme_2019_10k", 4): "Board of directors photograph, chairman Wile Coyote"}
TABLES = {("zeta_brochure", 2): ["| course | credits |\n|---|---|\n| pedagogy | 30 |"]}


def _pages(docs: dict[str, list[str]]) -> dict[str, list[Page]]:
    out = {}
    for stem, texts in docs.items():
        out[stem] = [
            Page(page_id=f"{stem}_{i}", doc_id=f"sha-{stem}", stem=stem, page=i, image=f"pages/{stem}_{i}.jpg",
                 width=1000, height=1400, dpi=144, text=t, ocr_text=OCR.get((stem, i), ""),
                 tables_md=TABLES.get((stem, i), []), text_source="text_layer" if t else "ocr")
            for i, t in enumerate(texts, start=1)
        ]
    return out


def write_corpus(ws: Workspace, docs: dict[str, list[str]] = DOCS) -> None:
    for stem, pages in _pages(docs).items():
        write_records(f"{ws.corpus_table('pages')}/{stem}.parquet", pages, Page)
        doc = Document(doc_id=f"sha-{stem}", stem=stem, source_path=f"{stem}.pdf", kind="pdf",
                       n_pages=len(pages), n_bytes=1, title=stem.replace("_", " "))
        write_records(f"{ws.corpus_table('documents')}/{stem}.parquet", [doc], Document)


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    w = Workspace(str(tmp_path / "ws"))
    write_corpus(w)
    return w


def top(index, query: str, doc_stem: str | None = None, k: int = 3) -> list[str]:
    return [h.page_id for h in index.search([query], top_k=k, doc_stem=doc_stem)[0]]


def test_page_with_the_words_ranks_first(ws: Workspace) -> None:
    result = build_index(ws)
    assert (result.n_pages, result.n_docs, result.up_to_date) == (7, 2, False)
    index = load_index(ws)
    assert isinstance(index.inner, BM25Index)  # behind the query rewrites (retrieve.normalize)
    assert top(index, "How much did net revenue increase for widgets in Europe?")[0] == "acme_2019_10k_2"
    assert top(index, "scholarships tuition")[0] == "zeta_brochure_2"
    stemmed = index.search(["disrupted risks"], top_k=1)[0][0]  # stemming: risks ~ Risk, disrupted ~ disruption
    assert stemmed.page_id == "acme_2019_10k_3" and stemmed.score > 0
    assert top(index, "who is the chairman on the board of directors")[0] == "acme_2019_10k_4"  # OCR text
    assert top(index, "how many credits is pedagogy")[0] == "zeta_brochure_2"  # table markdown


def test_batched_queries_and_result_shape(ws: Workspace) -> None:
    build_index(ws)
    index = load_index(ws)
    results = index.search(["widget sales", "campus map", "no such words qwertyuiop"], top_k=4)
    assert [len(r) for r in results] == [4, 4, 4]
    assert results[0][0].page_id == "acme_2019_10k_2" and results[1][0].page_id == "zeta_brochure_3"
    for hits in results:
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    assert all(h.score == 0 for h in results[2])  # nothing matches: filled in page order, score 0
    hit = results[0][0]
    assert (hit.stem, hit.page, hit.doc_id, hit.image_file) == ("acme_2019_10k", 2, "sha-acme_2019_10k",
                                                                "acme_2019_10k_2.jpg")
    assert index.search(["widget"], top_k=50)[0].__len__() == 7  # never more than the scope holds


def test_document_scope_excludes_other_documents(ws: Workspace) -> None:
    build_index(ws)
    index = load_index(ws)
    # "revenue" is on acme page 2 and on the zeta bookstore page
    assert set(top(index, "revenue", k=7)[:2]) == {"acme_2019_10k_2", "zeta_brochure_3"}
    scoped = index.search(["revenue"], top_k=10, doc_stem="zeta_brochure")[0]
    assert {h.stem for h in scoped} == {"zeta_brochure"} and len(scoped) == 3
    assert scoped[0].page_id == "zeta_brochure_3"
    assert top(index, "revenue", doc_stem="acme_2019_10k", k=1) == ["acme_2019_10k_2"]
    with pytest.raises(UnknownDocument, match="not in the index"):
        index.search(["revenue"], doc_stem="nope")


def test_rebuild_skipped_when_unchanged_and_redone_when_a_page_changes(ws: Workspace) -> None:
    first = build_index(ws)
    postings = Path(ws.index) / "bm25" / "postings.npz"
    stamp = postings.stat().st_mtime_ns
    again = build_index(ws)
    assert again.up_to_date and "index up to date" in again.message
    assert postings.stat().st_mtime_ns == stamp
    assert first.changed_docs == 2

    changed = dict(DOCS)
    changed["zeta_brochure"] = [*DOCS["zeta_brochure"][:2], "Campus map. Parking permits for visitors."]
    write_corpus(ws, changed)
    rebuilt = build_index(ws)
    assert not rebuilt.up_to_date
    assert (rebuilt.changed_docs, rebuilt.reused_docs) == (1, 1)  # only the changed document is re-analysed
    index = load_index(ws)
    assert top(index, "parking permits")[0] == "zeta_brochure_3"
    assert index.search(["bookstore"], top_k=1)[0][0].score == 0  # the old text is gone
    assert build_index(ws).up_to_date


def test_new_document_and_removed_document_trigger_rebuild(ws: Workspace) -> None:
    build_index(ws)
    write_corpus(ws, {"extra_doc": ["Quarterly earnings call transcript"]})
    assert not build_index(ws).up_to_date
    assert top(load_index(ws), "earnings transcript")[0] == "extra_doc_1"
    os.remove(f"{ws.corpus_table('pages')}/extra_doc.parquet")
    result = build_index(ws)
    assert not result.up_to_date and result.n_docs == 2
    assert not (Path(ws.index) / "bm25" / "terms" / "extra_doc.json").exists()


def test_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    empty = runner.invoke(app, ["index", "-w", str(tmp_path / "empty")])
    assert empty.exit_code == 2 and "no pages to index" in empty.output and "vrag-data ingest" in empty.output
    colpali = runner.invoke(app, ["index", "-w", str(tmp_path), "--retriever", "colpali",
                                  "--model-path", str(tmp_path / "no-weights")])
    assert colpali.exit_code != 0
    assert "--retriever bm25" in colpali.output and "config.json" in colpali.output
    assert len(colpali.output.strip().splitlines()) == 1
    with pytest.raises(Exception, match="no bm25 index"):
        load_index(Workspace(str(tmp_path / "empty")))


def test_cli_builds_then_reports_up_to_date(ws: Workspace) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["index", "-w", ws.root])
    assert first.exit_code == 0, first.output
    assert "built bm25 index: 7 pages, 2 documents" in first.output
    second = runner.invoke(app, ["index", "-w", ws.root])
    assert second.exit_code == 0 and "index up to date" in second.output


def test_page_references_and_adjacent_terms(tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path / "ws"))
    texts = [f"Section {i} discusses widgets and gadgets in general terms." for i in range(1, 9)]
    texts[4] = "Widgets overview\nGadget prices by region\nAnnual Review 2020  17"  # printed number 17 on PDF page 5
    texts[5] = "Net income fell while revenue from services rose."  # "net", "revenue" far apart
    texts[6] = "Net revenue rose; income from services fell."  # "net revenue" adjacent
    write_corpus(ws, {"brochure": texts})
    build_index(ws)
    index = load_index(ws)
    assert top(index, "What does the chart on page 3 show about widgets?", "brochure")[0] == "brochure_3"
    assert top(index, "How many gadgets are on page 17?", "brochure")[0] == "brochure_5"  # printed number
    assert top(index, "what was the net revenue", "brochure")[0] == "brochure_7"
