"""One big PDF split into page ranges over the workers and stitched back: the same documents, pages, blocks, images
and errors as ingesting it whole in one process; resume unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pymupdf
import pytest

from vrag_data.ingest import IngestOptions, ingest_paths
from vrag_data.ingest.document import DocJob
from vrag_data.ingest.pipeline import page_ranges, split_job
from vrag_data.schema.records import IngestError
from vrag_data.store import Workspace, read_records
from vrag_data.store.corpus import load_documents, load_layout, load_pages

N = 150
BIG_PAGE = 41  # far above max_page_pixels at 144 dpi: a page error inside the second range


def _pdf(path: Path) -> Path:
    doc = pymupdf.open()
    for i in range(1, N + 1):
        page = doc.new_page(width=14_400 if i == BIG_PAGE else 595, height=14_400 if i == BIG_PAGE else 842)
        if i % 30 == 1:
            page.insert_text((72, 60), f"Chapter {i // 30 + 1}", fontsize=20)
        page.insert_text((72, 100), f"Page {i}: revenue {1000 + i} million, margin {i % 17} percent.")
        page.insert_text((72, 130), "Segment results " + "x" * (i % 11))
    doc.set_toc([[1, f"Chapter {k + 1}", 30 * k + 1] for k in range(N // 30)])
    doc.save(path)
    return path


def _state(ws: Workspace) -> dict:
    pages = sorted(load_pages(ws), key=lambda p: p.page)
    docs = load_documents(ws)
    imgs = {p.page_id: hashlib.sha256(Path(ws.page_image(p.page_id)).read_bytes()).hexdigest() for p in pages}
    blocks = [(b.block_id, b.page, b.cls, b.text, b.bbox.raw) for b in sorted(load_layout(ws), key=lambda b: (b.page, b.block_id))]
    errors = [(e.stage, e.page, e.reason) for e in read_records(f"{ws.root}/corpus/errors.parquet", IngestError)]
    return {"docs": [d.model_dump(exclude={"source_path", "ingested_at"}) for d in docs],
            "pages": [p.model_dump(exclude={"ingested_at"}) for p in pages], "images": imgs, "blocks": blocks,
            "errors": sorted(errors, key=str)}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("split") / "in"
    folder.mkdir()
    return _pdf(folder / "filing.pdf")


def test_split_ranges_cover_the_document_once(big):
    opts = IngestOptions(layout="off", ocr="off", workers=2, split_pages=32)
    job = DocJob(path=str(big), stem="filing", doc_id="x", n_bytes=1, kind="pdf", ws_root="ws", opts=opts)
    ranges = [r.pages for r in split_job(job, opts, 2)]
    # guided: each range takes a quarter of what is left (2 workers), never under 16 pages but for the remainder
    assert ranges == [(1, 38), (39, 66), (67, 87), (88, 103), (104, 119), (120, 135), (136, 150)]
    assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:]))
    assert split_job(job, opts.model_copy(update={"split_pages": None}), 2) == []
    assert split_job(job, opts, 1) == []
    capped = opts.model_copy(update={"max_pages": 30})
    assert split_job(job, capped, 2) == []  # 30 pages after the cap: under split_pages, kept whole


def test_page_ranges_shrink_towards_the_end():
    assert page_ranges(500, 2) == [(1, 125), (126, 219), (220, 290), (291, 343), (344, 383), (384, 413), (414, 435),
                                   (436, 452), (453, 468), (469, 484), (485, 500)]
    assert page_ranges(100, 2) == [(1, 25), (26, 44), (45, 60), (61, 76), (77, 92), (93, 100)]  # 8 left: own range
    assert page_ranges(40, 4) == [(1, 16), (17, 32), (33, 40)]
    assert page_ranges(20, 2) == [(1, 20)]  # 4 left after 16: joins
    for n, w in ((1, 2), (17, 3), (999, 2), (5000, 8)):
        r = page_ranges(n, w)
        assert r[0][0] == 1 and r[-1][1] == n and all(b[0] == a[1] + 1 for a, b in zip(r, r[1:]))


@pytest.mark.slow
def test_split_ingest_equals_whole_ingest_and_resumes(big, tmp_path):
    whole = Workspace(str(tmp_path / "whole"))
    s1 = ingest_paths([str(big.parent)], whole, IngestOptions(layout="off", ocr="off", workers=1), progress=False)
    split = Workspace(str(tmp_path / "split"))
    s2 = ingest_paths([str(big.parent)], split, IngestOptions(layout="off", ocr="off", workers=2, split_pages=32), progress=False)
    assert s1.n_docs == s2.n_docs == 1 and s1.n_pages == s2.n_pages == N - 1  # the oversized page is left out
    a, b = _state(whole), _state(split)
    assert b["errors"] == a["errors"] and [e for e in b["errors"] if e[0] == "render"] == [
        ("render", BIG_PAGE, next(e[2] for e in a["errors"] if e[0] == "render"))]  # recorded once, with its page
    for key in ("docs", "pages", "images", "blocks"):
        assert b[key] == a[key], key
    assert [t.title for t in load_documents(split)[0].toc][:2] == ["Chapter 1", "Chapter 2"]
    again = ingest_paths([str(big.parent)], split, IngestOptions(layout="off", ocr="off", workers=2, split_pages=32), progress=False)
    assert again.n_skipped_unchanged == 1 and again.n_docs == 0 and _state(split) == b


@pytest.mark.slow
def test_one_split_document_moves_the_progress_line_by_its_parts(big, tmp_path, monkeypatch, caplog):
    import logging

    from vrag_data.ingest import pipeline
    from vrag_data.progress import lines_only

    monkeypatch.setattr(pipeline, "PROGRESS_EVERY", 0.0)  # a line at every update
    with caplog.at_level(logging.INFO, logger="vrag_data.progress"), lines_only():
        ingest_paths([str(big.parent)], Workspace(str(tmp_path / "ws")),
                     IngestOptions(layout="off", ocr="off", workers=2, split_pages=32), progress=True)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ingest: ")]
    partial = [x for x in lines if x.startswith("ingest: 0.")]  # one document, part of it done
    assert len(partial) >= 2 and all("/1 (" in x and "ETA" in x for x in partial)
    assert lines[-1].startswith("ingest: 1/1 (100%)") and lines[-1].endswith("done")
