"""Sample-corpus generation and task-import timings.

Run: .venv/bin/python bench/bench_sample_tasks.py
Prints wall and CPU seconds for generating the default corpus (6 docs) and a 60-doc corpus, and for
importing the real ../shared/corpus/qa.jsonl into a workspace holding all 45 documents' records.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.corpus_records import record_pdfs  # noqa: E402
from vrag_data.sample import make_sample_corpus  # noqa: E402
from vrag_data.store import Workspace  # noqa: E402
from vrag_data.tasks import import_tasks, load_tasks  # noqa: E402


def timed(label: str, fn):  # noqa: ANN001, ANN201
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    print(f"{label}: wall {time.perf_counter() - w0:.2f} s, cpu {time.process_time() - c0:.2f} s")
    return out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-sample-"))
    make_sample_corpus(tmp / "warm", docs=1, seed=99)  # imports and font setup out of the measurement
    for docs in (6, 60):
        sc = timed(f"sample-corpus --docs {docs}", lambda d=docs: make_sample_corpus(tmp / f"c{d}", docs=d, seed=0))
        pages = sum(__import__("pymupdf").open(p).page_count for p in sc.paths)
        print(f"  {len(sc.paths)} PDFs, {pages} pages, {sc.n_questions} questions")
    shared = REPO.parent / "shared" / "corpus"
    if (shared / "qa.jsonl").is_file():
        ws = Workspace(str(tmp / "ws")).makedirs()
        pdfs = sorted((shared / "docs").glob("*.pdf"))
        timed("record 45 shared PDFs (page sizes only)", lambda: record_pdfs(ws, pdfs))
        s = timed("tasks import shared qa.jsonl", lambda: import_tasks(str(shared / "qa.jsonl"), ws, "corpus"))
        print(f"  imported {s.imported}, skipped {s.skipped}, duplicates {s.duplicates}, by hop {s.by_hop}")
        timed("load_tasks", lambda: load_tasks(ws))


if __name__ == "__main__":
    main()
