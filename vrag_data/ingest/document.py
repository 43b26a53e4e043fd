"""Ingest one document (runs inside a worker process): page images, text layer, layout, OCR, TOC.

The worker writes its own per-document shards (stems are unique within a run, so workers never share a
file) and returns stats and errors; only the parent writes `corpus/errors.parquet`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vrag_data.ids import page_id
from vrag_data.ingest.geometry import Rect, clamp, scale
from vrag_data.ingest.backends import RawBlock, get_backend, ingest_hash
from vrag_data.ingest.layout import HEADING_LEVEL
from vrag_data.ingest.ocr import OcrLine, default_threads, rapidocr_lines
from vrag_data.ingest.options import DocStats, IngestOptions
from vrag_data.ingest.render import (
    OpenFailed,
    PageTooLarge,
    active_content_notices,
    encode_jpeg,
    import_pymupdf,
    open_image,
    open_pdf,
    render_pdf_page,
    write_bytes_atomic,
)
from vrag_data.ingest.textlayer import extract_text_layer, usable_chars
from vrag_data.ingest.toc import figures_from_blocks, toc_from_headings, toc_from_outline
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Document, IngestError, LayoutBlock, Page
from vrag_data.store.corpus import write_document
from vrag_data.store.workspace import Workspace


@dataclass
class DocJob:
    path: str
    stem: str
    doc_id: str
    n_bytes: int
    kind: str  # pdf / image / other
    ws_root: str
    opts: IngestOptions
    threads: int | None = None  # onnxruntime threads; set by the pool from the workers actually running
    pages: tuple[int, int] | None = None  # a part of a split document: pages first..last (1-based); None = whole
    n_planned: int = 0  # a part: the pages the whole document ingests (after max_pages)


@dataclass
class PartOutcome:
    """What one page range of a split document produced (the parent stitches the parts)."""

    pages: list["_PageOut"]
    errors: list[IngestError]
    meta: dict[str, Any] | None  # outline and title: from the first part only
    cut_at: int | None = None  # the time budget stopped this part after this page
    failed: bool = False  # the part could not run (the reason is among its errors)


@dataclass
class DocOutcome:
    stats: DocStats
    errors: list[IngestError] = field(default_factory=list)


@dataclass
class _PageOut:
    page: Page
    blocks: list[LayoutBlock]
    headings: list[tuple[int, int, str]]
    size: tuple[int, int]


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _box(rect: Rect, w: int, h: int) -> Box:
    return Box.from_raw(clamp(rect, w, h), w, h)


def _ocr_blocks(lines: list[OcrLine], pid: str, doc_id: str, pno: int, w: int, h: int, source: str) -> list[LayoutBlock]:
    return [
        LayoutBlock(block_id="", doc_id=doc_id, page_id=pid, page=pno, cls="ocr_line", bbox=_box(ln.rect, w, h),
                    text=ln.text, source=source, score=round(ln.score, 4))  # type: ignore[arg-type]
        for ln in lines
    ]


PageCallback = Callable[[int, int], None]  # (pages done in this document, pages planned)


class DocumentIngester:
    def __init__(self, job: DocJob, on_page: PageCallback | None = None) -> None:
        self.job = job
        self.on_page = on_page
        self.opts = job.opts
        self.ws = Workspace(job.ws_root)
        self.errors: list[IngestError] = []
        # onnxruntime threads for OCR and the layout model: the cores are already shared between workers
        self.ocr_threads = job.threads or self.opts.ocr_threads or default_threads(self.opts.workers)

    def error(self, stage: str, reason: str, page: int | None = None) -> None:
        self.errors.append(IngestError(path=self.job.path, stage=stage, reason=reason, page=page))

    # --- per page -------------------------------------------------------------------------------------
    def _save_image(self, pid: str, img: Any) -> None:
        write_bytes_atomic(self.ws, self.ws.page_image(pid), encode_jpeg(img, self.opts.jpeg_quality))

    def _needs_ocr(self, text: str) -> bool:
        mode = self.opts.ocr
        return mode in ("rapidocr", "paddleocr") or (mode == "auto" and usable_chars(text) < self.opts.ocr_min_chars)

    def _pdf_page(self, page: Any, pno: int) -> _PageOut | None:
        job, opts = self.job, self.opts
        pid = page_id(job.stem, pno)
        try:
            rendered = render_pdf_page(page, opts.dpi, opts.max_page_pixels)
        except PageTooLarge as err:
            self.error("render", f"page {pno}: {err}", pno)
            return None
        except Exception as err:  # noqa: BLE001 - one broken page must not lose the document
            self.error("render", f"page {pno} cannot be rendered: {_one_line(err)}", pno)
            return None
        w, h = rendered.size
        self._save_image(pid, rendered.pixels)
        backend = get_backend(opts.layout)
        tl = extract_text_layer(page, want_words=backend.needs_words)
        raw: list[RawBlock] = [RawBlock(rect=r, cls="text", source="text_layer", text=t) for r, t in tl.blocks]
        tables_md: list[str] = []
        headings: list[tuple[int, int, str]] = []
        if backend.per_page:
            try:
                lay = backend.page_layout(page, tl.words)
                raw.extend(lay.blocks)
                tables_md = lay.tables_md
                headings = [(pno, HEADING_LEVEL[b.model_cls], b.text) for b in lay.blocks if b.model_cls in HEADING_LEVEL and b.text]
            except Exception as err:  # noqa: BLE001
                self.error("layout", f"page {pno} layout analysis failed: {_one_line(err)}", pno)
        blocks = [
            LayoutBlock(block_id="", doc_id=job.doc_id, page_id=pid, page=pno, cls=b.cls, bbox=_box(scale(b.rect, rendered.sx, rendered.sy), w, h),
                        text=b.text, source=b.source, score=b.score)  # type: ignore[arg-type]
            for b in raw
        ]
        ocr_text = ""
        if opts.ocr != "paddleocr" and self._needs_ocr(tl.text):
            try:
                lines = rapidocr_lines(rendered.pixels, self.ocr_threads)
                blocks += _ocr_blocks(lines, pid, job.doc_id, pno, w, h, "rapidocr")
                ocr_text = "\n".join(ln.text for ln in lines)
            except Exception as err:  # noqa: BLE001
                self.error("ocr", f"page {pno} OCR failed: {_one_line(err)}", pno)
        pg = Page(page_id=pid, doc_id=job.doc_id, stem=job.stem, page=pno, image=f"pages/{pid}.jpg", width=w, height=h,
                  dpi=opts.dpi, text=tl.text, ocr_text=ocr_text, tables_md=tables_md)
        return _PageOut(pg, blocks, headings, (w, h))

    # --- per document ---------------------------------------------------------------------------------
    def _pdf(self) -> tuple[list[_PageOut], Any, int]:
        import_pymupdf(layout=get_backend(self.opts.layout).loads_layout_model, layout_threads=self.ocr_threads)
        doc = open_pdf(self.job.path)
        try:
            first, last = self.job.pages or (1, 0)
            n = min(doc.page_count, self.opts.max_pages or doc.page_count)
            if first == 1:  # document-wide notices: said once, by the whole document or its first part
                if doc.is_repaired:
                    # kept: a note, not a skip (the document's pages are ingested as the repair reads them)
                    self.error("notice", "damaged PDF, repaired on open and kept; some pages may be missing or "
                                         "incomplete (re-save it with a PDF tool to be sure)")
                for note in active_content_notices(doc):
                    self.error("notice", note)
                if n < doc.page_count:
                    self.error("notice", f"has {doc.page_count} pages; only the first {n} are ingested (max_pages={n}; raise "
                                         "--max-pages / ingest.max_pages to ingest more)")
            last = min(last or n, n)
            outs, t0, budget = [], time.monotonic(), self.opts.doc_time_budget_s
            self.cut_at: int | None = None
            for pno in range(first, last + 1):
                if budget is not None and pno > first and time.monotonic() - t0 > budget:
                    self.cut_at = pno - 1
                    if self.job.pages is None:
                        self._budget_notice(pno - 1, doc.page_count)
                        n = pno - 1
                    break
                if (o := self._pdf_page(doc[pno - 1], pno)) is not None:
                    outs.append(o)
                if self.on_page is not None:
                    self.on_page(pno - first + 1, last - first + 1)
            meta = {"outline": doc.get_toc(simple=True), "title": (doc.metadata or {}).get("title") or ""}
            return outs, meta, n
        finally:
            doc.close()

    def _budget_notice(self, kept_to: int, page_count: int) -> None:
        budget = self.opts.doc_time_budget_s
        self.error("notice", f"took longer than {budget:g} s; only the first {kept_to} of {page_count} pages are "
                             "ingested (raise ingest.doc_time_budget_s to ingest more)")

    def run_part(self) -> PartOutcome:
        """One page range of a split document: pages and their blocks, not written (the parent stitches)."""
        try:
            outs, meta, _ = self._pdf()
        except OpenFailed as err:
            self.error("open", str(err))
            return PartOutcome([], self.errors, None, failed=True)
        except Exception as err:  # noqa: BLE001 - recorded, the other parts go on
            self.error("ingest", _one_line(err))
            return PartOutcome([], self.errors, None, failed=True)
        first = self.job.pages[0] if self.job.pages else 1
        return PartOutcome(outs, self.errors, meta if first == 1 else None, self.cut_at)

    def _image(self) -> tuple[list[_PageOut], Any, int]:
        job, opts = self.job, self.opts
        img, img_dpi = open_image(job.path, opts.max_page_pixels)
        pid = page_id(job.stem, 1)
        w, h = img.size
        self._save_image(pid, img)
        blocks: list[LayoutBlock] = []
        ocr_text = ""
        if opts.ocr in ("auto", "rapidocr"):
            try:
                lines = rapidocr_lines(img, self.ocr_threads)
                blocks = _ocr_blocks(lines, pid, job.doc_id, 1, w, h, "rapidocr")
                ocr_text = "\n".join(ln.text for ln in lines)
            except Exception as err:  # noqa: BLE001
                self.error("ocr", f"page 1 OCR failed: {_one_line(err)}", 1)
        # An image has no physical size; 72 dpi (1 px = 1 pt) unless the file records its resolution.
        pg = Page(page_id=pid, doc_id=job.doc_id, stem=job.stem, page=1, image=f"pages/{pid}.jpg", width=w, height=h,
                  dpi=img_dpi or 72, ocr_text=ocr_text)
        return [_PageOut(pg, blocks, [], (w, h))], {"outline": [], "title": ""}, 1

    def _external(self, outs: list[_PageOut]) -> None:
        """A per-document layout backend (MinerU) and PaddleOCR run out of process, once per document."""
        opts = self.opts
        backend = get_backend(opts.layout)
        if backend.per_document and self.job.kind == "pdf":
            sizes = {o.page.page: o.size for o in outs}
            per_page = backend.document_layout(self.job.path, sizes, opts)
            for o in outs:
                mb = per_page.get(o.page.page)
                if mb is None:
                    continue
                o.blocks += [b.model_copy(update={"doc_id": self.job.doc_id, "page_id": o.page.page_id}) for b in mb.blocks]
                o.page.tables_md = mb.tables_md
                o.headings = mb.headings
        if opts.ocr == "paddleocr":
            from vrag_data.ingest.paddleocr import run_paddleocr

            images = {o.page.page: self.ws.page_image(o.page.page_id) for o in outs}
            lines = run_paddleocr(images, opts.paddleocr)
            for o in outs:
                got = lines.get(o.page.page, [])
                w, h = o.size
                o.blocks += _ocr_blocks(got, o.page.page_id, self.job.doc_id, o.page.page, w, h, "paddleocr")
                o.page.ocr_text = "\n".join(ln.text for ln in got)

    def _remove_stale_images(self, keep: set[int]) -> None:
        """A changed file with fewer pages (or a page that no longer renders) must not leave old images."""
        pattern = re.compile(rf"^{re.escape(self.job.stem)}_(\d+)\.jpg$")
        fs = self.ws.fs
        root = self.ws.pages.removeprefix("file://") if self.ws.is_local else self.ws.pages
        names = os.listdir(root) if self.ws.is_local else [p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
        for name in names:
            m = pattern.match(name)
            if m and int(m.group(1)) not in keep:
                fs.rm(f"{root}/{name}")

    def run(self) -> DocOutcome:
        job = self.job
        t0 = time.perf_counter()
        stats = DocStats(path=job.path, stem=job.stem, doc_id=job.doc_id, status="failed")
        try:
            if job.kind == "pdf":
                outs, meta, n_planned = self._pdf()
            elif job.kind == "image":
                outs, meta, n_planned = self._image()
            else:
                raise OpenFailed("unsupported file type (expected .pdf or an image: png, jpg, tiff, bmp, webp)")
            self._external(outs)
        except OpenFailed as err:
            self.error("open", str(err))
            return self._done(stats, t0)
        except Exception as err:  # noqa: BLE001 - recorded, the batch goes on
            self.error("ingest", _one_line(err))
            return self._done(stats, t0)
        if not outs:
            self.error("render", f"none of the {n_planned} pages could be rendered")
            return self._done(stats, t0)
        self._finish(outs, meta, stats, n_planned)
        return self._done(stats, t0)

    def _finish(self, outs: list[_PageOut], meta: dict[str, Any], stats: DocStats, n_planned: int) -> None:
        job, opts = self.job, self.opts
        blocks: list[LayoutBlock] = []
        for o in outs:
            o.page.text_source = (
                "text_layer" if usable_chars(o.page.text) >= max(1, opts.ocr_min_chars)
                else "ocr" if o.page.ocr_text.strip() else "text_layer" if o.page.text.strip() else "none"
            )
            for k, b in enumerate(o.blocks):
                blocks.append(b.model_copy(update={"block_id": f"{o.page.page_id}#{k}"}))
        n = len(outs)
        toc = toc_from_outline(meta["outline"], n_planned) or toc_from_headings(
            [h for o in outs for h in o.headings], n
        )
        title = str(meta["title"]).strip() or (toc[0].title if toc else "") or job.stem
        pages = [o.page for o in outs]
        doc = Document(
            doc_id=job.doc_id, stem=job.stem, source_path=job.path, kind="image" if job.kind == "image" else "pdf",
            n_pages=n_planned, n_bytes=job.n_bytes, title=title[:300], toc=toc, figures=figures_from_blocks(blocks),
            text_layer_fraction=round(sum(p.text_source == "text_layer" for p in pages) / n, 4),
            ingest_hash=ingest_hash(opts),
        )
        write_document(self.ws, doc, pages, blocks)
        self._remove_stale_images({p.page for p in pages})
        stats.status = "ingested"
        stats.n_pages = n
        stats.n_ocr_pages = sum(1 for p in pages if p.ocr_text.strip())
        stats.n_layout_blocks = sum(1 for b in blocks if b.source not in ("text_layer", "rapidocr", "paddleocr"))
        stats.n_tables = sum(len(p.tables_md) for p in pages)

    def _done(self, stats: DocStats, t0: float) -> DocOutcome:
        stats.seconds = round(time.perf_counter() - t0, 3)
        stats.n_errors = len(self.errors)
        return DocOutcome(stats=stats, errors=self.errors)


def ingest_document(job: DocJob, on_page: PageCallback | None = None) -> DocOutcome:
    """One document, written whole; `on_page` hears each page as it is done (a progress line inside a long one)."""
    return DocumentIngester(job, on_page).run()


def ingest_part(job: DocJob) -> PartOutcome:
    return DocumentIngester(job).run_part()


def stitch_parts(job: DocJob, parts: list[PartOutcome], seconds: float) -> DocOutcome:
    """The document from its parts, in page order, written as one (ids, ordering, errors as if unsplit). A part cut
    by the time budget ends the document there: later parts' pages are dropped, with the same notice."""
    ing = DocumentIngester(job)
    stats = DocStats(path=job.path, stem=job.stem, doc_id=job.doc_id, status="failed")
    ordered = sorted(parts, key=lambda p: p.pages[0].page.page if p.pages else 1 << 30)
    for p in parts:
        ing.errors.extend(p.errors)
    n_planned = job.n_planned
    cut = min((p.cut_at for p in parts if p.cut_at is not None), default=None)
    outs = [o for p in ordered for o in p.pages if cut is None or o.page.page <= cut]
    if cut is not None:
        ing._budget_notice(cut, job.n_planned)
        n_planned = cut
    meta = next((p.meta for p in parts if p.meta is not None), None)
    t0 = time.perf_counter() - seconds
    if meta is None or any(p.failed for p in parts):  # a document is written whole or not at all
        return ing._done(stats, t0)
    if not outs:
        ing.error("render", f"none of the {n_planned} pages could be rendered")
        return ing._done(stats, t0)
    try:
        ing._finish(outs, meta, stats, n_planned)
    except Exception as err:  # noqa: BLE001
        ing.error("ingest", _one_line(err))
    return ing._done(stats, t0)
