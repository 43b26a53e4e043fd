"""Ingest throughput at 144 dpi on the shared corpus, side by side with `pdftoppm -r 144 -jpeg`.

    .venv/bin/python bench/bench_ingest.py [--corpus ../shared/corpus] [--pages 40] [--ocr-pages 6]

Rows (same pages for the render rows):
  render+JPEG   PyMuPDF rasterise + Pillow JPEG, one process               vs pdftoppm, one process
  +text+layout  the ingest worker path without OCR (layout model with its table grids, charts), one process
  full ingest   `ingest_paths` on born-digital documents, 2 workers, OCR auto (born-digital: no OCR)
  OCR           `ingest_paths` on an image-only slide deck, OCR auto (RapidOCR), seconds per page
  OCR only      RapidOCR on the deck's rendered pages once the engine is loaded, seconds per page
Targets (issue 2): render+JPEG >= 2x pdftoppm; born-digital full ingest >= 5 pages/s on 2 cores;
OCR <= 1.5 s/page.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Clock:
    """Wall time and CPU seconds (this process + finished children). On a shared machine the CPU figure
    is the fair one: pages per CPU-second, times 2 for the 2 cores of the target machine when parallel."""

    def __enter__(self) -> "Clock":
        self.w, self.c = time.perf_counter(), time.process_time() + cpu_children()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() + cpu_children() - self.c


def render_jpeg(pdf: Path, n: int, out: Path, layout: bool) -> None:
    from vrag_data.ingest.layout import analyse_layout
    from vrag_data.ingest.textlayer import extract_text_layer

    pymupdf = import_pymupdf(layout)
    doc = pymupdf.open(pdf)
    for i in range(n):
        page = doc[i]
        r = render_pdf_page(page, 144, 60_000_000)
        (out / f"p_{i + 1}.jpg").write_bytes(encode_jpeg(r.pixels, 85))  # as the ingest worker does
        if layout:
            analyse_layout(page, extract_text_layer(page, want_words=True).words)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=25, help="pages per born-digital document")
    ap.add_argument("--ocr-pages", type=int, default=6)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    docs = Path(args.corpus) / "docs"
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-ingest-"))
    rows: list[tuple[str, str, str, str]] = []

    def row(name: str, n: int, c: Clock, parallel: int = 1, per_page: bool = False) -> None:
        if per_page:
            rows.append((name, f"{c.wall / n:.2f} s/page", f"{c.cpu / n:.2f} CPU-s/page", f"{n} pages"))
        else:
            rows.append((name, f"{n / c.wall:.1f} pages/s", f"{n / c.cpu * parallel:.1f} pages/s", f"{n} pages"))

    try:
        import_pymupdf(True, layout_threads=1)  # one process, one onnxruntime thread: the per-CPU figure
        pdfs = [docs / n for n in BORN_DIGITAL]
        counts = [min(args.pages, len(import_pymupdf(False).open(p))) for p in pdfs]
        total = sum(counts)
        for sub in ("a", "b", "c"):
            for pdf in pdfs:
                (tmp / pdf.stem / sub).mkdir(parents=True, exist_ok=True)
        # Untimed warm-up of both tools on page 1 (file cache, fonts), so neither pays it for the other.
        for pdf in pdfs:
            render_jpeg(pdf, 1, tmp / pdf.stem / "a", layout=False)
            if shutil.which("pdftoppm"):
                subprocess.run(["pdftoppm", "-r", "144", "-jpeg", "-f", "1", "-l", "1", str(pdf), str(tmp / pdf.stem / "b" / "w")], check=True)
        with Clock() as ours:
            for pdf, n in zip(pdfs, counts):
                render_jpeg(pdf, n, tmp / pdf.stem / "a", layout=False)
        row("render+JPEG (PyMuPDF + libjpeg-turbo q85), 1 process", total, ours)
        if shutil.which("pdftoppm"):
            with Clock() as pop:
                for pdf, n in zip(pdfs, counts):
                    subprocess.run(["pdftoppm", "-r", "144", "-jpeg", "-f", "1", "-l", str(n), str(pdf), str(tmp / pdf.stem / "b" / "p")], check=True)
            row("pdftoppm -r 144 -jpeg, 1 process", total, pop)
            rows.append(("ratio render+JPEG / pdftoppm", f"{pop.wall / ours.wall:.2f}x", f"{pop.cpu / ours.cpu:.2f}x", "target >= 2x"))
        else:
            rows.append(("pdftoppm", "not installed", "", "apt-get install -y poppler-utils"))
        with Clock() as lay:
            for pdf, n in zip(pdfs, counts):
                render_jpeg(pdf, n, tmp / pdf.stem / "c", layout=True)
        row("render+JPEG + text layer + layout model + tables + charts, 1 process", total, lay)

        ws = Workspace(str(tmp / "ws"))
        with Clock() as full:
            s = ingest_paths([str(p) for p in pdfs], ws, IngestOptions(workers=2, max_pages=args.pages), progress=False)
        row(f"full ingest, born-digital ({len(pdfs)} docs, layout pymupdf, OCR auto), 2 workers", s.n_pages, full, parallel=2)

        ws2 = Workspace(str(tmp / "ws2"))
        with Clock() as ocr:
            s2 = ingest_paths([str(docs / IMAGE_ONLY)], ws2, IngestOptions(workers=1, max_pages=args.ocr_pages, layout="off"), progress=False)
        row("OCR ingest, image-only slides (render + RapidOCR incl. engine load), 1 worker", s2.n_pages, ocr, per_page=True)

        # OCR alone once the engine is loaded (2 onnxruntime threads in one process, as a lone worker gets)
        from vrag_data.ingest.ocr import rapidocr_lines

        deck = import_pymupdf(False).open(docs / IMAGE_ONLY)
        shots = [render_pdf_page(deck[i], 144, 60_000_000) for i in range(min(args.ocr_pages, len(deck)))]
        rapidocr_lines(shots[0].pixels, 2)
        with Clock() as steady:
            for r in shots:
                rapidocr_lines(r.pixels, 2)
        row("OCR only, engine loaded (RapidOCR, 2 threads, 1 process)", len(shots), steady, per_page=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores; load average at start {load0:.1f}, at end {os.getloadavg()[0]:.1f} (1 min)")
    print("| measurement | wall | per CPU (x2 cores when parallel) | notes |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
