"""Retrieval benchmark: recall of gold evidence pages on the shared corpus's answerable questions.

    .venv/bin/python bench/bench_retrieval.py [--corpus ../shared/corpus] [--workspace DIR] [--json out.json]

Ingests the corpus PDFs into a scratch workspace with `vrag_data.ingest.ingest_paths` (kept and reused when
`--workspace` is given), then builds in-memory BM25 indexes for several configurations and reports
recall@1/5/10 (share of a question's gold pages in the top k, averaged over questions), hit@k (at least
one gold page in the top k), per document (the question's own document, MMLongBench-Doc style) and
corpus-wide, plus single-query latency p50/p99 and batched throughput.
Anchor (MM-Doc-R1, Table 3, MMLongBench-Doc, 5 pages within the document): BM25 42.0%, BGE-M3 51.3%,
ColQwen2.5 65.4%.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vrag_data.retrieve.bm25 import BM25Index, Bm25Params  # noqa: E402
from vrag_data.retrieve.build import index_pages  # noqa: E402
from vrag_data.schema.records import Document, Page  # noqa: E402
from vrag_data.store import Workspace, read_records  # noqa: E402

KS = (1, 5, 10)


def load_questions(corpus: Path) -> list[dict]:
    rows = [json.loads(line) for line in (corpus / "qa.jsonl").read_text().splitlines() if line.strip()]
    out = []
    for r in rows:
        if not r["evidence_pages"]:
            continue  # unanswerable: no gold page
        stem = Path(r["doc_id"]).stem
        out.append({"id": r["id"], "question": r["question"], "stem": stem, "benchmark": r["source_benchmark"],
                    "gold": {f"{stem}_{p}" for p in r["evidence_pages"]}})
    return out


def evaluate(index: BM25Index, questions: list[dict], scope: str, query_key: str = "question") -> dict:
    sums: dict[str, float] = defaultdict(float)
    per_bench: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        hits = index.search([q[query_key]], top_k=max(KS), doc_stem=q["stem"] if scope == "doc" else None)[0]
        ranked = [h.page_id for h in hits]
        for k in KS:
            found = len(q["gold"] & set(ranked[:k]))
            sums[f"recall@{k}"] += found / len(q["gold"])
            sums[f"hit@{k}"] += float(found > 0)
        per_bench[q["benchmark"]].append(len(q["gold"] & set(ranked[:5])) / len(q["gold"]))
    n = len(questions)
    out = {k: round(100 * v / n, 1) for k, v in sums.items()}
    out["recall@5_by_benchmark"] = {b: (round(100 * statistics.mean(v), 1), len(v)) for b, v in per_bench.items()}
    return out


def latency(index: BM25Index, questions: list[dict], scope: str, repeat: int = 3) -> dict:
    """Wall-clock per single-query call (p50/p99) and, for one batched call, queries per second of wall
    time and of process CPU time (the latter is what an unloaded core gives; the machine may be shared)."""
    times = []
    for _ in range(repeat):
        for q in questions:
            t = time.perf_counter()
            index.search([q["question"]], top_k=10, doc_stem=q["stem"] if scope == "doc" else None)
            times.append(time.perf_counter() - t)
    times.sort()
    batch = [q["question"] for q in questions] * 10
    wall, cpu = time.perf_counter(), time.process_time()
    index.search(batch, top_k=10)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"p50_ms": round(1000 * times[len(times) // 2], 3), "p99_ms": round(1000 * times[int(len(times) * 0.99)], 3),
            "batched_qps_wall": round(len(batch) / wall), "batched_qps_cpu": round(len(batch) / cpu)}


_PLAIN = dict(w_bigram=0.0, w_label=0.0, w_head=0.0)
# Cumulative steps: each row adds one thing to the row above; the last full row is the shipped default.
# "text layer only" rows drop the OCR text from the pages before indexing (no field may see it).
VARIANTS: dict[str, tuple[Bm25Params, bool]] = {
    "plain BM25, text layer only": (Bm25Params(w_tables=0.0, **_PLAIN), False),
    "plain BM25, text + OCR": (Bm25Params(w_tables=0.0, **_PLAIN), True),
    "plain BM25, text + OCR + tables": (Bm25Params(**_PLAIN), True),
    "+ adjacent-term pairs (w 0.5)": (Bm25Params(w_label=0.0, w_head=0.0), True),
    "+ page references (page N / printed N)": (Bm25Params(w_head=0.0), True),
    "+ first lines boosted = default": (Bm25Params(), True),
    "default, text layer only": (Bm25Params(), False),
}
DEFAULT = "+ first lines boosted = default"


def ingest(corpus: Path, ws: Workspace, layout: str) -> None:
    from vrag_data.ingest import IngestOptions, ingest_paths  # imported late so --help works without it

    summary = ingest_paths([str(corpus / "docs")], ws, IngestOptions(workers=2, layout=layout), progress=True)
    if summary.errors:
        print(f"ingest: {len(summary.errors)} errors, first: {summary.errors[0].reason}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--workspace", help="scratch workspace; reused when it already holds the ingested corpus")
    ap.add_argument("--json", type=Path, help="write all numbers here")
    ap.add_argument("--no-ingest", action="store_true", help="evaluate whatever the workspace already holds")
    ap.add_argument("--layout", default="pymupdf", choices=["pymupdf", "off"],
                    help="ingest layout analysis; `off` is much faster but yields no table markdown")
    args = ap.parse_args()

    ws = Workspace(args.workspace or tempfile.mkdtemp(prefix="vrag-bench-retrieval-"))
    pages = read_records(ws.corpus_table("pages"), Page)
    if not pages and not args.no_ingest:
        t = time.perf_counter()
        ingest(args.corpus, ws, args.layout)
        print(f"ingested {args.corpus / 'docs'} in {time.perf_counter() - t:.0f}s", file=sys.stderr)
        pages = read_records(ws.corpus_table("pages"), Page)
    titles = {d.stem: d.title for d in read_records(ws.corpus_table("documents"), Document)}
    stems = {p.stem for p in pages}
    all_questions = load_questions(args.corpus)
    questions = [q for q in all_questions if q["stem"] in stems]  # documents that failed to ingest are left out
    if len(questions) < len(all_questions):
        print(f"note: {len(all_questions) - len(questions)} questions skipped: their document is not in the workspace")
    print(f"{len(pages)} pages, {len({p.stem for p in pages})} documents, {len(questions)} answerable questions; "
          f"{sum(1 for p in pages if p.ocr_text.strip())} pages with OCR text; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")

    report: dict = {"pages": len(pages), "questions": len(questions), "variants": {}}
    header = "| configuration | scope | R@1 | R@5 | R@10 | hit@1 | hit@5 | hit@10 |"
    print(header + "\n|---|---|---|---|---|---|---|---|")
    text_only = [p.model_copy(update={"ocr_text": ""}) for p in pages]
    for name, (params, use_ocr) in VARIANTS.items():
        t = time.perf_counter()
        index = index_pages(pages if use_ocr else text_only, titles, params)
        build_s = time.perf_counter() - t
        entry = {"params": params.model_dump(), "ocr": use_ocr, "build_s": round(build_s, 2)}
        for scope in ("doc", "corpus"):
            m = evaluate(index, questions, scope)
            entry[scope] = m
            print(f"| {name} | {'per document' if scope == 'doc' else 'corpus-wide'} | {m['recall@1']} | "
                  f"{m['recall@5']} | {m['recall@10']} | {m['hit@1']} | {m['hit@5']} | {m['hit@10']} |")
        report["variants"][name] = entry
    default = index_pages(pages, titles, Bm25Params())
    report["latency"] = {scope: latency(default, questions, scope) for scope in ("doc", "corpus")}
    print("latency (default index, one query per call, top 10):", json.dumps(report["latency"]))
    print(f"load average during the run: {os.getloadavg()}")
    print("recall@5 per benchmark (default, per document):",
          json.dumps(report["variants"][DEFAULT]["doc"]["recall@5_by_benchmark"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
