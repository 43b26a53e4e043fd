"""Ingest throughput at 144 dpi on the shared corpus, side by side with `pdftoppm -r 144 -jpeg`.

    .venv/bin/python bench/bench_ingest.py [--corpus ../shared/corpus] [--pages 40] [--ocr-pages 6]

Rows (same pages for the render rows):
  render+JPEG   PyMuPDF rasterise + Pillow JPEG, one process               vs pdftoppm, one process
  +text+layout  the ingest worker path without OCR (layout model, find_tables, charts), one process
  full ingest   `ingest_paths` on born-digital documents, 2 workers, OCR auto (born-digital: no OCR)
  OCR           `ingest_paths` on an image-only slide deck, OCR auto (RapidOCR), seconds per page
Targets (issue 2): render+JPEG >= 2x pdftoppm; born-digital full ingest >= 5 pages/s on 2 cores;
OCR <= 1.5 s/page.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vrag_data.ingest import IngestOptions, ingest_paths  # noqa: E402
from vrag_data.ingest.render import encode_jpeg, import_pymupdf, render_pdf_page  # noqa: E402
from vrag_data.store import Workspace  # noqa: E402

BORN_DIGITAL = ["AMAZON_2017_10K.pdf", "Independents-Report.pdf", "2023.acl-long.386.pdf", "PIP_Seniors-and-Tech-Use_040314.pdf"]
IMAGE_ONLY = "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf"


def render_jpeg(pdf: Path, n: int, out: Path, layout: bool) -> float:
    from vrag_data.ingest.layout import analyse_layout
    from vrag_data.ingest.textlayer import extract_text_layer

    pymupdf = import_pymupdf(layout)
    doc = pymupdf.open(pdf)
    t0 = time.perf_counter()
    for i in range(n):
        page = doc[i]
        r = render_pdf_page(page, 144, 60_000_000)
        (out / f"p_{i + 1}.jpg").write_bytes(encode_jpeg(r.image, 85))
        if layout:
            analyse_layout(page, extract_text_layer(page, want_words=True).words)
    return time.perf_counter() - t0


def pdftoppm(pdf: Path, n: int, out: Path) -> float | None:
    exe = shutil.which("pdftoppm")
    if exe is None:
        return None
    t0 = time.perf_counter()
    subprocess.run([exe, "-r", "144", "-jpeg", "-f", "1", "-l", str(n), str(pdf), str(out / "p")], check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=40, help="pages per born-digital document")
    ap.add_argument("--ocr-pages", type=int, default=6)
    args = ap.parse_args()
    docs = Path(args.corpus) / "docs"
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-ingest-"))
    rows: list[tuple[str, str, str]] = []
    try:
        pdfs = [docs / n for n in BORN_DIGITAL]
        counts = [min(args.pages, len(import_pymupdf(False).open(p))) for p in pdfs]
        total = sum(counts)
        ours = poppler = layout_t = 0.0
        for pdf, n in zip(pdfs, counts):
            for sub in ("a", "b", "c"):
                (tmp / pdf.stem / sub).mkdir(parents=True, exist_ok=True)
            ours += render_jpeg(pdf, n, tmp / pdf.stem / "a", layout=False)
            pt = pdftoppm(pdf, n, tmp / pdf.stem / "b")
            poppler = poppler + pt if pt is not None and poppler is not None else None  # type: ignore[operator]
            layout_t += render_jpeg(pdf, n, tmp / pdf.stem / "c", layout=True)
        rows.append(("render+JPEG (PyMuPDF+Pillow), 1 process", f"{total / ours:.1f} pages/s", f"{total} pages"))
        if poppler:
            rows.append(("pdftoppm -r 144 -jpeg, 1 process", f"{total / poppler:.1f} pages/s", f"ratio ours/pdftoppm = {poppler / ours:.2f}x"))
        else:
            rows.append(("pdftoppm -r 144 -jpeg", "not installed", "apt-get install -y poppler-utils"))
        rows.append(("render+JPEG+text+layout+tables+charts, 1 process", f"{total / layout_t:.1f} pages/s", f"{layout_t / total * 1000:.0f} ms/page"))

        ws = Workspace(str(tmp / "ws"))
        opts = IngestOptions(workers=2, max_pages=args.pages)
        t0 = time.perf_counter()
        s = ingest_paths([str(p) for p in pdfs], ws, opts, progress=False)
        dt = time.perf_counter() - t0
        rows.append(("full ingest born-digital (layout pymupdf, OCR auto), 2 workers", f"{s.n_pages / dt:.1f} pages/s",
                     f"{s.n_pages} pages, {len(pdfs)} docs, {dt:.1f} s incl. pool start"))

        ws2 = Workspace(str(tmp / "ws2"))
        t0 = time.perf_counter()
        s2 = ingest_paths([str(docs / IMAGE_ONLY)], ws2, IngestOptions(workers=1, max_pages=args.ocr_pages, layout="off"), progress=False)
        dt2 = time.perf_counter() - t0
        rows.append(("OCR ingest, image-only slides (RapidOCR, all threads), 1 worker", f"{dt2 / s2.n_pages:.2f} s/page",
                     f"{s2.n_pages} pages incl. engine load"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average at end {load:.1f}")
    print("| measurement | result | notes |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
