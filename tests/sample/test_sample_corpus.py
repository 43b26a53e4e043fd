"""The synthetic sample corpus: determinism, qa.jsonl format, and exact gold evidence boxes."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pymupdf
import pytest
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.sample import make_sample_corpus

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

FIELDS = {"id", "source_benchmark", "doc_id", "question", "answer", "evidence_pages", "evidence_sources",
          "answer_format", "doc_type", "extra"}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    return make_sample_corpus(tmp_path_factory.mktemp("sample") / "out", docs=6, seed=0)


@pytest.fixture(scope="module")
def rows(corpus) -> list[dict]:
    return [json.loads(line) for line in corpus.qa_path.read_text(encoding="utf-8").splitlines()]


def _boxes(rows: list[dict]):
    for row in rows:
        for box in row["extra"]["evidence_boxes"]:
            yield row, box


def test_same_seed_gives_identical_bytes_and_other_seed_differs(corpus, tmp_path: Path) -> None:
    again = make_sample_corpus(tmp_path / "again", docs=6, seed=0)
    out = corpus.qa_path.parent
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in (tmp_path / "again").iterdir())
    for name in names:
        assert (out / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    other = make_sample_corpus(tmp_path / "other", docs=6, seed=1)
    assert {p.read_bytes() for p in other.paths}.isdisjoint({p.read_bytes() for p in corpus.paths})
    assert len(again.paths) == 6


def test_manifest_lists_every_file_with_its_sha256(corpus) -> None:
    manifest = json.loads(corpus.manifest_path.read_text())
    assert manifest["seed"] == 0 and manifest["docs"] == 6
    assert [f["file"] for f in manifest["files"]] == [p.name for p in corpus.paths]
    for f in manifest["files"]:
        data = (corpus.qa_path.parent / f["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"]
        assert 4 <= f["pages"] <= 8
    assert hashlib.sha256(corpus.qa_path.read_bytes()).hexdigest() == manifest["qa"]["sha256"]


def test_documents_are_reports_and_slide_decks_with_scanned_pages(corpus) -> None:
    manifest = json.loads(corpus.manifest_path.read_text())
    kinds = Counter(f["kind"] for f in manifest["files"])
    assert kinds == {"report": 3, "slides": 3}
    scanned = 0
    for f in manifest["files"]:
        with pymupdf.open(corpus.qa_path.parent / f["file"]) as doc:
            assert doc.metadata["creationDate"] == "D:20240101000000Z"
            for page in doc:
                landscape = page.rect.width > page.rect.height
                assert landscape == (f["kind"] == "slides")
                if page.number + 1 in f["scanned_pages"]:
                    scanned += 1
                    assert page.get_text().strip() == ""  # image only, no text layer
                    assert len(page.get_images()) == 1
                else:
                    assert len(page.get_text().split()) > 5
    assert scanned >= 2


def test_qa_rows_follow_the_corpus_format(corpus, rows) -> None:
    pages = {p.name: pymupdf.open(p).page_count for p in corpus.paths}
    kinds = Counter(r["extra"]["kind"] for r in rows)
    for kind in ("table_cell", "chart_value", "paragraph_fact", "scanned_fact", "multi_page", "cross_doc",
                 "unanswerable"):
        assert kinds[kind] >= 1, kind
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)  # every question is asked once
    for r in rows:
        assert set(r) == FIELDS
        assert r["source_benchmark"] == "sample" and r["doc_id"] in pages
        assert r["answer_format"] in {"Str", "Int", "Float", "List", "None"}
        docs = r["extra"].get("evidence_docs", [r["doc_id"]] * len(r["evidence_pages"]))
        for doc, page in zip(docs, r["evidence_pages"]):
            assert 1 <= page <= pages[doc]
        assert {(b["doc"], b["page"]) for b in r["extra"]["evidence_boxes"]} == set(zip(docs, r["evidence_pages"]))
        if r["extra"]["kind"] == "unanswerable":
            assert r["answer"] == "Not answerable" and r["evidence_pages"] == []
        if r["extra"]["kind"] == "cross_doc":
            assert len(set(r["extra"]["doc_ids"])) == 2


def test_gold_boxes_lie_in_the_page_at_144_dpi(corpus, rows) -> None:
    folder = corpus.qa_path.parent
    for row, box in _boxes(rows):
        assert box["dpi"] == 144
        with pymupdf.open(folder / box["doc"]) as doc:
            rect = doc[box["page"] - 1].rect
        x1, y1, x2, y2 = box["bbox"]
        assert 0 <= x1 < x2 <= rect.width * 2 and 0 <= y1 < y2 <= rect.height * 2, (row["id"], box)
        # "exact" means tight: no gold box covers more than a fifth of its page
        assert (x2 - x1) * (y2 - y1) < 0.2 * rect.width * rect.height * 4, (row["id"], box)


def test_answer_text_is_inside_its_box_on_text_layer_pages(corpus, rows) -> None:
    folder = corpus.qa_path.parent
    scanned = {f["file"]: set(f["scanned_pages"]) for f in json.loads(corpus.manifest_path.read_text())["files"]}
    checked = Counter()
    for row, box in _boxes(rows):
        if box["page"] in scanned[box["doc"]]:
            continue
        with pymupdf.open(folder / box["doc"]) as doc:
            clip = pymupdf.Rect(*box["bbox"]) * (72 / 144)
            text = _norm(doc[box["page"] - 1].get_text("text", clip=clip))
        assert _squash(box["text"]) in _squash(text), (row["id"], box, text)
        if len(row["extra"]["evidence_boxes"]) == 1:  # single-hop: the answer itself is visible in the box
            assert row["answer"] in text, (row["id"], row["answer"], text)
        if box["source"] in ("table", "chart"):  # a cell or a value label holds nothing else
            assert _squash(text) == _squash(box["text"]), (row["id"], text)
        checked[box["source"]] += 1
    assert checked["table"] >= 6 and checked["chart"] >= 3 and checked["text"] >= 6


def test_scanned_page_boxes_contain_the_answer_for_ocr(corpus, rows) -> None:
    """Image-only pages have no text layer: read each gold crop with the OCR engine the project ships."""
    rapidocr = pytest.importorskip("rapidocr")
    from PIL import Image, ImageOps

    engine = rapidocr.RapidOCR()
    folder = corpus.qa_path.parent
    # one crop from a portrait report and one from a slide deck keeps OCR time small
    picked = {r["doc_type"]: r for r in reversed(rows) if r["extra"]["kind"] == "scanned_fact"}
    assert set(picked) == {"Report", "Slide deck"}
    found = 0
    for row in picked.values():
        (box,) = row["extra"]["evidence_boxes"]
        with pymupdf.open(folder / box["doc"]) as doc:
            pix = doc[box["page"] - 1].get_pixmap(dpi=144)
        img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples).crop(tuple(round(v) for v in box["bbox"]))
        # only the box is read; a white border gives the text detector the margin it expects around text
        result = engine(ImageOps.expand(img, border=24, fill="white"), use_cls=False)
        text = " ".join(result.txts or ())
        assert _squash(row["answer"]) in _squash(text), (row["id"], row["answer"], text)
        found += 1
    assert found == 2


def test_cli_writes_the_corpus(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["sample-corpus", str(tmp_path / "c"), "--docs", "2", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "c").glob("*.pdf"))) == 2
    rows = (tmp_path / "c" / "qa.jsonl").read_text().splitlines()
    assert any(json.loads(r)["extra"]["kind"] == "cross_doc" for r in rows)
    # a smaller corpus written into the same folder replaces the old files instead of mixing with them
    res = CliRunner().invoke(app, ["sample-corpus", str(tmp_path / "c"), "--docs", "1", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "c").glob("*.pdf"))) == 1
    bad = CliRunner().invoke(app, ["sample-corpus", str(tmp_path / "d"), "--docs", "0"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
