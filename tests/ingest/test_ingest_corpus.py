"""Ingest on the real corpus: a born-digital report, an image-only slide deck, a scanned datasheet."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from vrag_data.ingest import IngestOptions, ingest_paths
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents, load_errors, load_layout, load_pages, page_index

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

REPORT = "Independents-Report.pdf"
SLIDES = "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf"  # no text layer at all
SCAN = "DSA-278777.pdf"  # 1-bit scans with an OCR text layer and an outline
DOCS = (REPORT, SLIDES, SCAN)
MAX_PAGES = 2  # keeps OCR of the slide deck short


@pytest.fixture(scope="module")
def ingested(shared_corpus: Path, tmp_path_factory):
    ws = Workspace(str(tmp_path_factory.mktemp("ws")))
    paths = [str(shared_corpus / "docs" / name) for name in DOCS]
    summary = ingest_paths(paths, ws, IngestOptions(max_pages=MAX_PAGES, workers=2), progress=False)
    return ws, summary, shared_corpus


def _real(errors):
    """Errors other than notices (e.g. "only the first N pages are ingested")."""
    return [e for e in errors if e.stage != "notice"]


def test_summary_counts(ingested):
    ws, summary, _ = ingested
    assert _real(summary.errors) == []
    assert summary.n_docs == 3 and summary.n_pages == 6
    assert {d.status for d in summary.docs} == {"ingested"}


def test_page_images_have_the_right_names_and_sizes(ingested):
    ws, _, corpus = ingested
    pages = load_pages(ws)
    assert len(pages) == 6
    for name in DOCS:
        stem = Path(name).stem
        doc = pymupdf.open(corpus / "docs" / name)
        for n in (1, 2):
            img_path = Path(ws.root) / "pages" / f"{stem}_{n}.jpg"
            assert img_path.is_file(), img_path
            with Image.open(img_path) as im:
                assert im.format == "JPEG"
                size = im.size
            rect = doc[n - 1].rect
            assert size == (round(rect.width * 2), round(rect.height * 2))  # 144 dpi = 2 px per point
            page = page_index(ws)[f"{stem}_{n}"]
            assert (page.width, page.height, page.dpi, page.image) == (*size, 144, f"pages/{stem}_{n}.jpg")
    assert page_index(ws)["Independents-Report_1"].width == 1224


def test_layout_blocks_exist_with_boxes_inside_the_page(ingested):
    ws, _, _ = ingested
    pages = page_index(ws)
    for stem in ("Independents-Report", "DSA-278777"):
        blocks = load_layout(ws, stem)
        model = [b for b in blocks if b.source == "pymupdf"]
        assert len(model) >= 5, stem
        assert {"text", "title"} <= {b.cls for b in model}
        for b in blocks:
            p = pages[b.page_id]
            x0, y0, x1, y1 = b.bbox.raw
            assert 0 <= x0 <= x1 <= p.width and 0 <= y0 <= y1 <= p.height
            assert b.block_id.startswith(b.page_id + "#")
    # the text layer of the report names what its heading blocks say
    titles = [b.text for b in load_layout(ws, "Independents-Report") if b.cls == "title"]
    assert any("Pew Research Center" in t for t in titles)


def test_ocr_reads_words_visible_on_an_image_only_slide(ingested):
    ws, _, _ = ingested
    stem = Path(SLIDES).stem
    slide = page_index(ws)[f"{stem}_2"]
    assert slide.text == "" and slide.text_source == "ocr"
    text = slide.ocr_text.lower()
    for word in ("quick facts", "fatalities", "airbus", "germanwings"):  # read off the rendered slide
        assert word in text, word
    lines = [b for b in load_layout(ws, stem) if b.cls == "ocr_line" and b.page == 2]
    assert lines and all(b.source == "rapidocr" and 0 < (b.score or 0) <= 1 for b in lines)
    fat = next(b for b in lines if "fatalities" in b.text.lower())
    assert fat.bbox.norm[0] < 300 and 400 < fat.bbox.norm[1] < 800  # left column, lower half, as on the slide


def test_born_digital_pages_skip_ocr(ingested):
    ws, _, _ = ingested
    for p in load_pages(ws, "Independents-Report"):
        assert p.text_source == "text_layer" and p.ocr_text == ""
    assert "Pew Research Center" in page_index(ws)["Independents-Report_2"].text


def test_documents_have_toc_and_metadata(ingested):
    ws, _, _ = ingested
    docs = {d.stem: d for d in load_documents(ws)}
    scan = docs["DSA-278777"]
    assert scan.toc[0].title.startswith("MCS") and scan.toc[0].page == 1  # from the PDF outline
    assert scan.n_pages == 2 and scan.kind == "pdf" and len(scan.doc_id) == 64
    report = docs["Independents-Report"]
    assert report.toc and report.text_layer_fraction == 1.0  # headings-based TOC (no outline)
    assert docs[Path(SLIDES).stem].text_layer_fraction == 0.0


def test_rerun_is_a_no_op(ingested):
    ws, _, corpus = ingested
    img = Path(ws.root) / "pages" / "Independents-Report_1.jpg"
    before = img.stat().st_mtime_ns
    again = ingest_paths([str(corpus / "docs" / n) for n in DOCS], ws, IngestOptions(max_pages=MAX_PAGES, workers=1), progress=False)
    assert (again.n_docs, again.n_skipped_unchanged, _real(again.errors)) == (0, 3, [])
    assert img.stat().st_mtime_ns == before
    assert len(load_pages(ws)) == 6 and _real(load_errors(ws)) == []


def test_changed_file_replaces_pages_and_a_different_file_cannot_take_the_stem(shared_corpus, tmp_path):
    ws = Workspace(str(tmp_path / "ws"))
    src = pymupdf.open(shared_corpus / "docs" / REPORT)
    mine = tmp_path / "mine" / "report.pdf"
    mine.parent.mkdir()
    src.select([0, 1, 2])
    src.save(mine)
    opts = IngestOptions(layout="off", ocr="off", workers=1)
    assert ingest_paths([str(mine)], ws, opts, progress=False).n_pages == 3
    one = pymupdf.open(mine)
    one.select([1])
    one.save(tmp_path / "one.pdf")
    shutil.copy(tmp_path / "one.pdf", mine)  # same path, new content, fewer pages
    s = ingest_paths([str(mine)], ws, opts, progress=False)
    assert (s.n_docs, s.n_pages) == (1, 1)
    assert [p.page_id for p in load_pages(ws, "report")] == ["report_1"]
    assert sorted(os.listdir(Path(ws.root) / "pages")) == ["report_1.jpg"]
    other = tmp_path / "elsewhere" / "report.pdf"
    other.parent.mkdir()
    shutil.copy(shared_corpus / "docs" / "PEPSICO_2023_8K_dated-2023-05-05.pdf", other)
    s = ingest_paths([str(other)], ws, opts, progress=False)
    assert s.n_docs == 0 and len(s.errors) == 1
    reason = s.errors[0].reason
    assert str(mine) in reason and s.errors[0].path == str(other)
    assert load_documents(ws)[0].source_path == str(mine) and len(load_pages(ws)) == 1
    assert [e.path for e in load_errors(ws)] == [str(other)]
