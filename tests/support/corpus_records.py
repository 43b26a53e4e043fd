"""Write Document/Page records for PDFs straight from PyMuPDF page sizes (no rendering, no layout).

Task import only needs documents and page sizes, so its tests do not wait for, or depend on, the ingest stage."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from vrag_data.ids import page_id, sha256_file
from vrag_data.schema.records import Document, Page
from vrag_data.store import Workspace, write_records


def record_pdfs(ws: Workspace, pdfs: list[Path], dpi: int = 144, max_pages: int | None = None) -> list[Document]:
    docs = []
    for pdf in pdfs:
        with pymupdf.open(pdf) as d:
            n = d.page_count
            sizes = [(p.rect.width, p.rect.height) for p in d]
        stem, doc_id = pdf.stem, sha256_file(str(pdf))
        doc = Document(doc_id=doc_id, stem=stem, source_path=str(pdf), kind="pdf", n_pages=n,
                       n_bytes=pdf.stat().st_size)
        keep = sizes[: max_pages] if max_pages else sizes
        pages = [Page(page_id=page_id(stem, i), doc_id=doc_id, stem=stem, page=i, image=f"pages/{page_id(stem, i)}.jpg",
                      width=round(w * dpi / 72), height=round(h * dpi / 72), dpi=dpi)
                 for i, (w, h) in enumerate(keep, start=1)]
        write_records(f"{ws.corpus_table('documents')}/{stem}.parquet", [doc], Document)
        write_records(f"{ws.corpus_table('pages')}/{stem}.parquet", pages, Page)
        docs.append(doc)
    return docs


def blank_pdf(path: Path, pages: int, size: tuple[float, float] = (612, 792)) -> Path:
    d = pymupdf.open()
    for i in range(pages):
        d.new_page(width=size[0], height=size[1]).insert_text((72, 72), f"{path.stem} page {i + 1}")
    d.save(path)
    d.close()
    return path
