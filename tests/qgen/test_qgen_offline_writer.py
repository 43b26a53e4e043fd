"""`tasks generate` with the offline oracle writer on an ingested sample corpus, and the pure checks."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest
from typer.testing import CliRunner

from tests.support.qgen_workspace import qgen_workspace
from vrag_data.cli.main import app
from vrag_data.qgen import generate_tasks, load_rejections
from vrag_data.qgen.evidence import EvidencePool, page_regions
from vrag_data.filters.setlevel import question_tokens
from vrag_data.qgen.verify import duplicate_score, is_choice, known_question
from vrag_data.qgen.writer import Rejected, Written, check_question, parse_reply
from vrag_data.rewards.answer import normalize_answer, parse_list
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Document, LayoutBlock, Page
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents, page_index
from vrag_data.tasks import load_tasks

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow


def _words_in_box(pdf: str, page: int, raw: tuple[float, ...], dpi: int) -> str:
    """The PDF's own words whose centre lies inside the box (raw px at `dpi` -> points)."""
    s = 72 / dpi
    x1, y1, x2, y2 = (v * s for v in raw)
    with pymupdf.open(pdf) as d:
        words = d[page - 1].get_text("words")
    return " ".join(w[4] for w in words if x1 <= (w[0] + w[2]) / 2 <= x2 and y1 <= (w[1] + w[3]) / 2 <= y2)


def _shown(value: str, text: str) -> bool:
    return f" {normalize_answer(value)} " in f" {normalize_answer(text)} "


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory):
    ws = qgen_workspace(tmp_path_factory.mktemp("qgen") / "ws")
    summary = generate_tasks(ws, n=12)
    return ws, summary


def test_oracle_tasks_have_boxes_inside_their_pages_and_visible_answers(oracle_run) -> None:
    ws, s = oracle_run
    tasks = [t for t in load_tasks(ws) if t.benchmark == "generated"]
    assert s.kept == len(tasks) == 12 and s.writer == "oracle" and s.verify_mode == "rules"
    assert set(s.by_kind) == {"single", "multi_page", "cross_doc"} and set(s.by_type) == {"extraction", "logic"}
    assert s.calls == 0 and s.requests == 0  # no model anywhere
    pages = page_index(ws)
    docs = {d.stem: d for d in load_documents(ws)}
    for t in tasks:
        assert t.evidence_pages and t.evidence_boxes and t.sources
        assert {b.page_id for b in t.evidence_boxes} == set(t.evidence_pages)
        assert len(t.doc_ids) == (2 if t.hop_type == "cross_doc" else 1)
        if t.hop_type != "single":
            assert len(t.evidence_pages) == 2
        for stem in t.doc_stems:  # never names its document (the company it is about is fine)
            assert stem.replace("_", " ") not in t.question.lower().replace("_", " ") and "page" not in t.question
        shown = []
        for b in t.evidence_boxes:
            p = pages[b.page_id]
            x1, y1, x2, y2 = b.box.raw
            assert 0 <= x1 < x2 <= p.width and 0 <= y1 < y2 <= p.height
            assert b.box.norm == pytest.approx(Box.from_raw(b.box.raw, p.width, p.height).norm, abs=0.01)
            shown.append(_words_in_box(docs[p.stem].source_path, p.page, b.box.raw, p.dpi))
        # the values the answer rests on are printed inside the evidence boxes of the PDF itself
        for v in t.extra["support"]:
            assert any(_shown(v, text) for text in shown), (t.question, v, shown)
        if t.reasoning_type == "extraction":
            items = parse_list(t.answer) if t.answer_format == "List" else [t.answer]
            assert all(any(_shown(i, text) for text in shown) for i in items)


def test_summary_accounts_for_every_attempt(oracle_run) -> None:
    ws, s = oracle_run
    rej = [r for r in load_rejections(ws) if r.run_id == s.run_id]
    assert s.attempted == s.kept + s.already + len(rej)
    assert s.rejected == {k: sum(r.reason == k for r in rej) for k in {r.reason for r in rej}}
    assert all(r.reason and r.detail for r in rej)


def test_rerun_is_idempotent(oracle_run) -> None:
    ws, s = oracle_run
    before = {t.task_id for t in load_tasks(ws)}
    again = generate_tasks(ws, n=12)
    assert again.run_id == s.run_id and again.kept == 0 and again.already == 12
    assert {t.task_id for t in load_tasks(ws)} == before


def test_kind_type_source_filters(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    s = generate_tasks(ws, n=4, kinds=["single"], types=["extraction"], sources=["table"])
    tasks = load_tasks(ws)
    assert s.kept == len(tasks) == 4
    assert all(t.hop_type == "single" and t.sources == ["table"] and t.reasoning_type == "extraction" for t in tasks)
    assert all(t.evidence_boxes[0].source == "table" for t in tasks)


def test_cli_generate_and_bad_options(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    r = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--n", "3", "--kinds", "cross_doc"])
    assert r.exit_code == 0, r.output
    assert "kept 3 of" in r.output and "cross_doc 3" in r.output
    bad = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--kinds", "single,triple"])
    assert bad.exit_code == 2 and "--kinds" in bad.output
    half = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--writer-url", "http://127.0.0.1:9/v1"])
    assert half.exit_code == 2 and "go together" in half.output
    empty = CliRunner().invoke(app, ["tasks", "generate", "-w", str(tmp_path / "nothing")])
    assert empty.exit_code != 0 and "no ingested documents" in empty.output


# -- pure pieces ---------------------------------------------------------------------------------------

DOC = Document(doc_id="d" * 64, stem="acme_annual_report_2023", source_path="/x/acme_annual_report_2023.pdf",
               kind="pdf", n_pages=3, n_bytes=1, title="Acme Annual Report 2023")


def _w(q: str) -> Written:
    return Written(q, "42", "Int", "extraction")


@pytest.mark.parametrize(("question", "reason"), [
    ("What was revenue in acme_annual_report_2023 for 2021?", "names_document"),
    ("According to the Acme Annual Report 2023, what was revenue in 2021?", "names_document"),
    ("What does the chart on page 4 show for Europe?", "names_page"),
    ("Which region leads on slide 2 of the deck?", "names_page"),
    ("What is the value in the highlighted box for 2021?", "refers_to_shown_image"),
    ("What revenue does this document report for 2021?", "refers_to_shown_image"),
    ("Revenue 2021?", "too_short"),
])
def test_check_question_rejects(question: str, reason: str) -> None:
    out = check_question(_w(question), [DOC])
    assert isinstance(out, Rejected) and out.reason == reason


def test_check_question_accepts_a_standalone_question() -> None:
    assert check_question(_w("What was Acme Robotics' revenue in 2021, in USD millions?"), [DOC]) is None


def test_parse_reply() -> None:
    ok = parse_reply('```json\n{"question": "Which year had higher sales?", "answer": 2021, "answer_format": "Int", '
                     '"reasoning_type": "Logic"}\n```', "logic", "m")
    assert isinstance(ok, Written) and ok.answer == "2021" and ok.reasoning_type == "logic"
    lst = parse_reply('<think>hm</think>{"question": "Which two regions grew?", "answer": ["Europe", "Asia"]}', "extraction", "m")
    assert isinstance(lst, Written) and lst.answer_format == "List" and json.loads(lst.answer) == ["Europe", "Asia"]
    for text, reason in (("Sure, here it is: Q: what? A: 3", "invalid_json"), ('{"question": "x y z w"}', "missing_field"),
                         ('{"question": "a b c d", "answer": "1", "answer_format": "Number"}', "bad_answer_format"),
                         ('{"decline": "only a footer"}', "writer_declined"), ('[1, 2]', "invalid_json")):
        out = parse_reply(text, "extraction", "m")
        assert isinstance(out, Rejected) and out.reason == reason, text


def test_duplicate_score_ignores_questions_about_other_numbers() -> None:
    known = [question_tokens("Did Acme have more users in Q1 2020 or in Q3 2020?")]
    assert duplicate_score("Did Acme have more users in Q1 2020 or in Q3 2020 ?", known) == 1.0
    assert duplicate_score("did acme have MORE users in q1 2020, or in q3 2020", known) == 1.0
    assert duplicate_score("Did Acme have more users in Q1 2020 or in Q4 2020?", known) == 0.0  # another fact
    assert duplicate_score("Who leads Acme?", known) == 0.0


def test_questions_about_other_cells_of_one_long_named_table_are_not_duplicates() -> None:
    """A table named by its column headers makes two questions about different cells share nearly every word (found
    on the tuning half: 72 of 360 attempts refused as near-duplicates, many of no kept task at all); a known answer
    tells them apart."""
    desc = ("in the table with the columns Three Months Ended June 30, 2022 EBITDA, Three Months Ended June 30, 2022 "
            "EBIT, Three Months Ended June 30, 2022 Net Income and 4 more in the Form 8-K of Acme Corp")
    a = f"What is the Three Months Ended June 30, 2022 EBITDA value of Interest expense, net {desc}?"
    b = f"What is the Three Months Ended June 30, 2022 EBIT value of Interest expense, net {desc}?"
    assert duplicate_score(b, [question_tokens(a)]) >= 0.8  # words alone: a near-duplicate
    assert duplicate_score(b, [known_question(a, "140")], "270") == 0.0  # another cell, another answer
    assert duplicate_score(b, [known_question(a, "140")], "140") >= 0.8  # the same answer: still one
    assert duplicate_score(a, [known_question(a, "$ 1,143")], "$1,143") == 1.0  # answers compared normalised


def test_is_choice() -> None:
    assert is_choice("In which year was revenue higher, 2019 or 2020?")
    assert not is_choice("What was the revenue in 2020?")


def _block(n: int, cls: str, source: str, raw: tuple[float, float, float, float], text: str = "x y") -> LayoutBlock:
    return LayoutBlock(block_id=f"p_1#{n}", doc_id="d", page_id="p_1", page=1, cls=cls,  # type: ignore[arg-type]
                       bbox=Box.from_raw(raw, 1000, 1000), text=text, source=source)  # type: ignore[arg-type]


def test_page_regions_keep_the_structured_block_of_overlapping_ones() -> None:
    page = Page(page_id="p_1", doc_id="d", stem="p", page=1, image="pages/p_1.jpg", width=1000, height=1000, dpi=144)
    blocks = [
        _block(0, "text", "text_layer", (100, 100, 900, 140), "Revenue 9,176 8,761"),  # a row of the table
        _block(1, "table", "pymupdf", (100, 90, 900, 400), "USD millions Revenue 9,176"),
        _block(2, "table", "find_tables", (95, 85, 905, 405), "|USD millions|2019|\n|---|---|\n|Revenue|9,176|"),
        _block(3, "footer", "pymupdf", (100, 950, 300, 980), "Acme - page 1"),
        _block(4, "text", "pymupdf", (100, 500, 900, 600), "A paragraph of text."),
        _block(5, "chart", "pymupdf", (100, 650, 900, 900), ""),  # no text, still a chart a VLM can read
        _block(6, "text", "pymupdf", (100, 910, 900, 940), " "),  # empty running text: nothing to ask about
    ]
    got = page_regions(blocks, page, min_chars=2)
    assert sorted((r.block.block_id, r.source) for r in got) == [("p_1#2", "table"), ("p_1#4", "text"), ("p_1#5", "chart")]


def test_evidence_pool_picks_each_kind_deterministically() -> None:
    import random

    def page(stem: str, n: int) -> Page:
        return Page(page_id=f"{stem}_{n}", doc_id=stem, stem=stem, page=n, image="", width=1000, height=1000, dpi=144)

    from vrag_data.qgen.evidence import Region

    def region(stem: str, n: int, src: str) -> Region:
        b = LayoutBlock(block_id=f"{stem}_{n}#0", doc_id=stem, page_id=f"{stem}_{n}", page=n, cls="text",
                        bbox=Box.from_raw((1, 1, 50, 50), 1000, 1000), text="abc", source="pymupdf")
        return Region(b, page(stem, n), src)  # type: ignore[arg-type]

    pool = EvidencePool({"a": [region("a", 1, "table"), region("a", 2, "text")], "b": [region("b", 1, "chart")]})
    for kind in ("single", "multi_page", "cross_doc"):
        e1, e2 = pool.pick(kind, random.Random(5)), pool.pick(kind, random.Random(5))
        assert e1 == e2 and e1 is not None and e1.kind == kind
    mp = pool.pick("multi_page", random.Random(1))
    assert mp is not None and mp.stems == ["a"] and len(mp.page_ids) == 2
    cd = pool.pick("cross_doc", random.Random(1))
    assert cd is not None and sorted(cd.stems) == ["a", "b"]
    assert not EvidencePool({"b": [region("b", 1, "chart")]}).possible("multi_page")


def test_empty_workspace_is_a_clear_error(tmp_path: Path) -> None:
    from vrag_data.errors import VragError

    with pytest.raises(VragError, match="no ingested documents"):
        generate_tasks(Workspace(str(tmp_path / "empty")), n=1)


def test_a_page_of_the_same_document_is_not_a_competitor_for_printing_the_documents_name(tmp_path) -> None:
    """The rules' ambiguity check: a question names its document ("the Acme annual report 2021"); the document's
    cover prints that name, and counting those words made the cover outscore the evidence page (found on the tuning
    half: a quarterly report's summary page refused its own tables' questions). Within one document the name tells
    no page from another, so its words do not count there; they still do against other documents' pages."""
    from tests.support.train_workspace import build_workspace
    from vrag_data.qgen.evidence import Evidence, Region
    from vrag_data.qgen.verify import Verifier, VerifyReport
    from vrag_data.qgen.writer import Attempt
    from vrag_data.retrieve import load_index
    from vrag_data.schema.geometry_types import Box
    from vrag_data.schema.records import LayoutBlock
    from vrag_data.store.corpus import load_pages

    ws, _ = build_workspace(tmp_path / "ws")
    pages = {p.page_id: p for p in load_pages(ws)}
    page = pages["acme_report_2"]  # "Acme revenue table: revenue in 2021 was 18.5 million dollars, ..."
    block = LayoutBlock(block_id="acme_report_2#0", doc_id=page.doc_id, page_id=page.page_id, page=2, cls="text",
                        bbox=Box.from_raw((0, 0, 50, 50), page.width, page.height), text=page.text, source="text_layer")
    attempt = Attempt(0, Evidence("single", (Region(block, page, "text"),)), "extraction")
    w = Written("What was revenue in the Acme annual report 2021?", "18.5 million dollars", "Str", "extraction")
    label = {"acme_report": "the Acme annual report 2021"}
    searcher = load_index(ws)
    before = Verifier(pages, searcher, None)._rules(attempt, w, VerifyReport("rules"))
    assert isinstance(before, Rejected) and before.reason == "ambiguous" and "acme_report_1" in before.detail
    assert Verifier(pages, searcher, None, labels=label)._rules(attempt, w, VerifyReport("rules")) is None
