"""Full ingest of mixed real documents, as a user runs it: one `vrag-data ingest --workers 2` process over a
folder of six PDFs of the shared corpus (a paper, a report, a brochure, two image-only slide decks, a 10-K), layout
pymupdf, OCR auto. Wall time, pages/s, CPU seconds, peak RSS of the whole process tree (sampled every 50 ms),
pages that went through OCR.

    .venv/bin/python bench/bench_ingest_mixed.py [--corpus ../shared/corpus] [--workers 2] [--runs 1]
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

import psutil

REPO = Path(__file__).resolve().parents[1]
VRAG = str(Path(sys.executable).parent / "vrag-data")
DOCS = [
    "2023.acl-long.386.pdf",  # paper
    "PIP_Seniors-and-Tech-Use_040314.pdf",  # report
    "GPL-Graduate-Studies-Professional-Learning-Brochure-Jul-2021.pdf",  # brochure
    "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf",  # slides, image only
    "finalpresentationdeck-whatwhyhowofcertificationsocial-160324220748_95.pdf",  # slides, image only
    "AMAZON_2017_10K.pdf",  # 10-K
]


def run_tree(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the process and every descendant it waited for) and peak RSS (bytes, summed over
    the process tree, sampled every 50 ms) of one command."""
    t0, cpu0 = time.perf_counter(), _children_cpu()
    proc = psutil.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        rss = 0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                continue
        peak = max(peak, rss)
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall, _children_cpu() - cpu0, peak


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ocr_pages(ws: Path) -> tuple[int, int]:
    """Pages written, and how many of them took their text from OCR."""
    import duckdb

    pages = f"{ws / 'corpus' / 'pages'}/*.parquet"
    n, n_ocr = duckdb.connect().execute(f"select count(*), count(*) filter (where text_source = 'ocr') from read_parquet('{pages}')").fetchone()  # type: ignore[misc]
    return int(n), int(n_ocr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-mixed-"))
    try:
        (tmp / "docs").mkdir()
        for name in DOCS:
            shutil.copy(Path(a.corpus) / "docs" / name, tmp / "docs" / name)
        print(f"machine: {os.cpu_count()} cores; load average (1 min) before: {os.getloadavg()[0]:.2f}")
        print("| run | pages (OCR) | wall | pages/s | CPU-s | peak RSS | load after |\n|---|---|---|---|---|---|---|")
        for i in range(a.runs):
            ws = tmp / f"ws{i}"
            wall, cpu, peak = run_tree([VRAG, "ingest", str(tmp / "docs"), "-w", str(ws), "--workers", str(a.workers), "-q"])
            n, n_ocr = ocr_pages(ws)
            print(f"| {i + 1} | {n} ({n_ocr}) | {wall:.1f} s | {n / wall:.2f} | {cpu:.0f} | "
                  f"{peak / 2**30:.2f} GB | {os.getloadavg()[0]:.2f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
