"""One big PDF on every core: page-range split of a document over the ingest workers, whole processes timed.

    .venv/bin/python bench/bench_ingest_split.py [--corpus ../shared/corpus] [--pages 500] [--short 100]

Rows (each a whole `vrag-data ingest` process, start-up included, fresh workspace each time):
  big, one core     the same PDF, 1 worker, the process pinned to one core (`taskset -c 0`): the serial reference
  big, 1 worker     a born-digital PDF of `--pages` pages (10-K pages of the shared corpus joined), layout pymupdf
  big, 2 workers    the same with the default split (ranges of the document over the 2 workers)
  short render+text `--short` pages, layout off, OCR off, 2 workers   vs   `pdftoppm -r 144 -jpeg` on the same pages
  start-up          `vrag-data ingest --help` (what the Python imports cost before the first page)
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

SOURCES = ["AMERICANEXPRESS_2022_10K.pdf", "BOEING_2022_10K.pdf", "AMCOR_2023_10K.pdf", "COSTCO_2021_10K.pdf"]
VRAG = str(Path(sys.executable).parent / "vrag-data")


def joined_pdf(docs: Path, pages: int, out: Path) -> Path:
    import pymupdf

    dst = pymupdf.open()
    for name in SOURCES:
        with pymupdf.open(docs / name) as src:
            take = min(len(src), pages - len(dst))
            dst.insert_pdf(src, from_page=0, to_page=take - 1)
        if len(dst) >= pages:
            break
    dst.save(out)
    return out


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=500)
    ap.add_argument("--short", type=int, default=100)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-split-"))
    loads = [os.getloadavg()[0]]
    class _Rows(list):  # printed as they come: a long run that fails later keeps what it measured
        def append(self, r: tuple[str, str, str]) -> None:
            super().append(r)
            print("| " + " | ".join(r) + " |", flush=True)

    rows = _Rows()
    try:
        (tmp / "big").mkdir()
        (tmp / "short").mkdir()
        joined_pdf(Path(a.corpus) / "docs", a.pages, tmp / "big" / "filing.pdf")
        short = joined_pdf(Path(a.corpus) / "docs", a.short, tmp / "short" / "filing100.pdf")
        startup = min(timed([VRAG, "ingest", "--help"]) for _ in range(3))
        rows.append(("start-up: `vrag-data ingest --help` (imports)", f"{startup:.2f} s", "best of 3"))
        walls: dict[int, float] = {}
        big = [str(tmp / "big"), "--layout", "pymupdf", "-q"]
        one_core = timed(["taskset", "-c", "0", VRAG, "ingest", *big, "-w", str(tmp / "ws-big-core"), "--workers", "1"])
        loads.append(os.getloadavg()[0])
        rows.append((f"{a.pages}-page born-digital PDF, layout pymupdf, 1 worker pinned to one core",
                     f"{one_core:.1f} s", f"{a.pages / one_core:.2f} pages/s"))
        for workers in (1, 2):
            walls[workers] = timed([VRAG, "ingest", *big, "-w", str(tmp / f"ws-big-{workers}"), "--workers", str(workers)])
            loads.append(os.getloadavg()[0])
            rows.append((f"{a.pages}-page born-digital PDF, layout pymupdf, {workers} worker(s)",
                         f"{walls[workers]:.1f} s", f"{a.pages / walls[workers]:.2f} pages/s"))
        rows.append(("speed-up 2 workers / 1 worker on one core", f"{one_core / walls[2]:.2f}x", "goal >= 1.8x"))
        rows.append(("speed-up 2 workers / 1 worker (its layout model threads over both cores)", f"{walls[1] / walls[2]:.2f}x", ""))
        ours = timed([VRAG, "ingest", str(tmp / "short"), "-w", str(tmp / "ws-short"), "--layout", "off", "--ocr", "off",
                      "--workers", "2", "-q"])
        (tmp / "ppm").mkdir()
        theirs = timed(["pdftoppm", "-r", "144", "-jpeg", str(short), str(tmp / "ppm" / "p")])
        loads.append(os.getloadavg()[0])
        rows.append((f"{a.short} pages render + text layer, 2 workers, whole process", f"{ours:.1f} s", f"{a.short / ours:.1f} pages/s"))
        rows.append((f"`pdftoppm -r 144 -jpeg`, same {a.short} pages, whole process", f"{theirs:.1f} s", f"{a.short / theirs:.1f} pages/s"))
        rows.append(("ratio ours / pdftoppm (speed)", f"{theirs / ours:.2f}x", "goal >= 2x"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores; load average (1 min) at start and after each step: "
          + ", ".join(f"{x:.1f}" for x in loads))
    print("| measurement | wall | rate / notes |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")  # again, together


if __name__ == "__main__":
    main()
