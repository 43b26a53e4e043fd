"""Retrieval benchmark: recall of gold evidence pages on the shared corpus's answerable questions.

    .venv/bin/python bench/bench_retrieval.py [--corpus ../shared/corpus] [--workspace DIR] [--json out.json]
        [--text-only] [--dense-model DIR] [--force-index] [--bm25-ablation]

Ingests the corpus PDFs into a scratch workspace with `vrag_data.ingest.ingest_paths` (kept and reused when
`--workspace` is given), builds the workspace's BM25 and dense indexes (`vrag_data.retrieve.build_index`'s
builders: the dense page embeddings are cached in the workspace, so a second run only searches) and reports,
per document (the question's own PDF, MMLongBench-Doc style), recall@1/5/10 by document type for

    retriever  in  bm25 | dense | hybrid (RRF of both)
    queries    in  as given | normalised | normalised + financial vocabulary

plus the BM25 index as it was before page-level fields ("bm25 before"), and the CPU-seconds per page each index
took to build. Recall@k = share of a question's gold pages in the top k, averaged over questions.
`--bm25-ablation` adds the older table of BM25 features (each row adds one to the row above), per document and
corpus-wide. Anchor (MM-Doc-R1, Table 3, MMLongBench-Doc, 5 pages within the document): BM25 42.0%, BGE-M3
51.3%, ColQwen2.5 65.4%.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vrag_data.retrieve.base import Searcher  # noqa: E402
from vrag_data.retrieve.bm25 import BM25Index, Bm25Params  # noqa: E402
from vrag_data.retrieve.build import _aliases, build_bm25, index_pages  # noqa: E402
from vrag_data.retrieve.normalize import QueryOptions  # noqa: E402
from vrag_data.retrieve.searchers import HybridSearcher, NormalizedSearcher  # noqa: E402
from vrag_data.schema.records import Document, Page  # noqa: E402
from vrag_data.store import Workspace, read_records  # noqa: E402

KS = (1, 5, 10)
_NO_PAGE_FIELDS = dict(w_section=0.0, w_statement=0.0)
FINANCIAL = "Financial (all)"  # "Financial report" (MMLongBench-Doc) + FinanceBench's "Financial filing (...)"
REWRITES: dict[str, QueryOptions | None] = {
    "as given": None,
    "normalised": QueryOptions(finance_vocab=False),
    "normalised + finance vocab": QueryOptions(),
}


def load_questions(corpus: Path) -> list[dict]:
    rows = [json.loads(line) for line in (corpus / "qa.jsonl").read_text().splitlines() if line.strip()]
    out = []
    for r in rows:
        if not r["evidence_pages"]:
            continue  # unanswerable: no gold page
        stem = Path(r["doc_id"]).stem
        out.append({"id": r["id"], "question": r["question"], "stem": stem, "benchmark": r["source_benchmark"],
                    "type": r.get("doc_type") or "unknown",
                    "gold": {f"{stem}_{p}" for p in r["evidence_pages"]}})
    return out


def recall_by_type(searcher: Searcher, questions: list[dict], scope: str = "doc") -> dict[str, dict]:
    """{"all" | type | FINANCIAL: {"R@1", "R@5", "R@10", "hit@5", "n"}} in percent."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q in questions:
        hits = searcher.search([q["question"]], top_k=max(KS), doc_stem=q["stem"] if scope == "doc" else None)[0]
        ranked = [h.page_id for h in hits]
        groups = ["all", q["type"]] + ([FINANCIAL] if q["type"].startswith("Financial") else [])
        for g in groups:
            sums[g]["n"] += 1
            for k in KS:
                found = len(q["gold"] & set(ranked[:k]))
                sums[g][f"R@{k}"] += found / len(q["gold"])
            sums[g]["hit@5"] += float(bool(q["gold"] & set(ranked[:5])))
    return {g: {**{k: round(100 * v / s["n"], 1) for k, v in s.items() if k != "n"}, "n": int(s["n"])}
            for g, s in sums.items()}


def ingest(corpus: Path, ws: Workspace, layout: str) -> None:
    from vrag_data.ingest import IngestOptions, ingest_paths  # imported late so --help works without it

    summary = ingest_paths([str(corpus / "docs")], ws, IngestOptions(workers=2, layout=layout), progress=True)
    if summary.errors:
        print(f"ingest: {len(summary.errors)} errors, first: {summary.errors[0].reason}", file=sys.stderr)


def text_layer_workspace(corpus: Path, ws: Workspace) -> None:
    """Pages from the PDFs' text layer and outline only (no page images, no OCR, no layout): minutes instead of
    the better part of an hour for a full ingest on a shared 2-core machine. Image-only pages stay empty."""
    import hashlib

    import pymupdf

    from vrag_data.schema.records import TocEntry
    from vrag_data.store import write_records

    for pdf in sorted((corpus / "docs").glob("*.pdf")):
        doc_id = hashlib.sha256(pdf.read_bytes()).hexdigest()
        with pymupdf.open(pdf) as doc:
            pages = [Page(page_id=f"{pdf.stem}_{i}", doc_id=doc_id, stem=pdf.stem, page=i, image=f"pages/{pdf.stem}_{i}.jpg",
                          width=1, height=1, dpi=144, text=pg.get_text(), text_source="text_layer")
                     for i, pg in enumerate(doc, start=1)]
            toc = [TocEntry(level=lv, title=t, page=max(n, 1)) for lv, t, n in doc.get_toc()]
            title = (doc.metadata or {}).get("title") or ""
        write_records(f"{ws.corpus_table('pages')}/{pdf.stem}.parquet", pages, Page)
        write_records(f"{ws.corpus_table('documents')}/{pdf.stem}.parquet",
                      [Document(doc_id=doc_id, stem=pdf.stem, source_path=pdf.name, kind="pdf", n_pages=len(pages),
                                n_bytes=pdf.stat().st_size, title=title, toc=toc)], Document)


def build_retrievers(ws: Workspace, pages: list[Page], titles: dict[str, str], dense_model: str | None,
                     force: bool, with_dense: bool = True) -> tuple[dict[str, Searcher], dict[str, dict]]:
    """The searchers to compare and, per index, its build cost (CPU-seconds per page; wall seconds)."""
    cost: dict[str, dict] = {}
    t, c = time.perf_counter(), time.process_time()
    before = index_pages(pages, titles, Bm25Params(w_section=0.0, w_statement=0.0))
    cost["bm25 before"] = {"cpu_s_per_page": round((time.process_time() - c) / len(pages), 4),
                           "wall_s": round(time.perf_counter() - t, 1), "note": "in memory, no page-level fields"}
    res = build_bm25(ws, force=force)
    cost["bm25"] = {"cpu_s_per_page": round(res.cpu_seconds / max(res.n_pages, 1), 4), "wall_s": round(res.seconds, 1),
                    "up_to_date": res.up_to_date}
    bm25 = BM25Index.load(ws.path("index", "bm25"))
    if not with_dense:
        return {"bm25 before": before, "bm25": bm25}, cost
    from vrag_data.retrieve.dense import DenseIndex, build_dense  # needs the `dense` extra

    res = build_dense(ws, dense_model, force=force)
    manifest = json.loads(Path(ws.path("index", "dense", "manifest.json")).read_text())
    cpu = res.cpu_seconds if not res.up_to_date else manifest.get("cpu_seconds", 0.0)  # cached: the original build
    cost["dense"] = {"cpu_s_per_page": round(cpu / max(res.n_pages, 1), 4), "wall_s": round(res.seconds, 1),
                     "model": manifest["model"], "windows": manifest.get("embedded_windows"),
                     "up_to_date": res.up_to_date}
    dense = DenseIndex.load(ws.path("index", "dense"))
    hybrid = HybridSearcher([("bm25", bm25, 1.0), ("dense", dense, 1.0)])
    return {"bm25 before": before, "bm25": bm25, "dense": dense, "hybrid": hybrid}, cost


def cached_dense(ws: Workspace, pages: list[Page]) -> tuple[Searcher, set[str]]:
    """A dense index over the documents whose window embeddings are already cached (a build still running, or
    stopped): the rows are then compared on those documents' questions only."""
    import numpy as np

    from vrag_data.retrieve.bm25 import PageMeta
    from vrag_data.retrieve.dense import DenseIndex, load_encoder, resolve_model

    emb_dir = Path(ws.path("index", "dense", "emb"))
    done = {f.stem for f in emb_dir.glob("*.npz")}
    metas, embs, owners = [], [], []
    for stem in sorted(done):
        z = np.load(emb_dir / f"{stem}.npz")
        ps = sorted((p for p in pages if p.stem == stem), key=lambda p: p.page)
        embs.append(z["emb"])
        owners.append(z["page"] + len(metas))
        metas += [PageMeta(p.page_id, p.doc_id, p.stem, p.page) for p in ps]
    model = load_encoder(resolve_model(None)[0])
    return DenseIndex(metas, np.concatenate(embs), np.concatenate(owners), model), done


def bm25_ablation(pages: list[Page], titles: dict[str, str], questions: list[dict]) -> dict:
    """The BM25 feature table of the first retrieval round (raw queries), per document and corpus-wide."""
    plain = dict(w_bigram=0.0, w_label=0.0, w_head=0.0, w_section=0.0, w_statement=0.0)
    rows = {
        "plain BM25, text layer only": (Bm25Params(w_tables=0.0, **plain), False),
        "plain BM25, text + OCR + tables": (Bm25Params(**plain), True),
        "+ adjacent-term pairs (w 0.5)": (Bm25Params(w_label=0.0, w_head=0.0, **_NO_PAGE_FIELDS), True),
        "+ page references": (Bm25Params(w_head=0.0, **_NO_PAGE_FIELDS), True),
        "+ first lines boosted": (Bm25Params(**_NO_PAGE_FIELDS), True),
        "+ page-level fields (section, statement)": (Bm25Params(), True),
    }
    text_only = [p.model_copy(update={"ocr_text": ""}) for p in pages]
    out = {}
    print("\n| BM25 configuration (raw queries) | scope | R@1 | R@5 | R@10 |\n|---|---|---|---|---|")
    for name, (params, use_ocr) in rows.items():
        index = index_pages(pages if use_ocr else text_only, titles, params)
        out[name] = {}
        for scope in ("doc", "corpus"):
            m = recall_by_type(index, questions, scope)["all"]
            out[name][scope] = m
            print(f"| {name} | {scope} | {m['R@1']} | {m['R@5']} | {m['R@10']} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--workspace", help="scratch workspace; reused when it already holds the ingested corpus")
    ap.add_argument("--json", type=Path, help="write all numbers here")
    ap.add_argument("--no-ingest", action="store_true", help="evaluate whatever the workspace already holds")
    ap.add_argument("--layout", default="pymupdf", choices=["pymupdf", "off"],
                    help="ingest layout analysis; `off` is much faster but yields no table markdown")
    ap.add_argument("--text-only", action="store_true",
                    help="build the workspace from the PDFs' text layer only (no ingest: no OCR, no tables)")
    ap.add_argument("--dense-model", help="local sentence-transformers folder (default: the bundled MiniLM)")
    ap.add_argument("--force-index", action="store_true", help="rebuild the indexes (to time them)")
    ap.add_argument("--bm25-only", action="store_true", help="leave the dense and hybrid rows out")
    ap.add_argument("--dense-cached", action="store_true",
                    help="dense rows from the embeddings cached so far (no build), on those documents' questions")
    ap.add_argument("--bm25-ablation", action="store_true", help="also the BM25 feature table")
    args = ap.parse_args()

    ws = Workspace(args.workspace or tempfile.mkdtemp(prefix="vrag-bench-retrieval-"))
    pages = read_records(ws.corpus_table("pages"), Page)
    if not pages and not args.no_ingest:
        t = time.perf_counter()
        if args.text_only:
            text_layer_workspace(args.corpus, ws)
        else:
            ingest(args.corpus, ws, args.layout)
        print(f"ingested {args.corpus / 'docs'} in {time.perf_counter() - t:.0f}s", file=sys.stderr)
        pages = read_records(ws.corpus_table("pages"), Page)
    titles = {d.stem: d.title for d in read_records(ws.corpus_table("documents"), Document)}
    stems = {p.stem for p in pages}
    all_questions = load_questions(args.corpus)
    questions = [q for q in all_questions if q["stem"] in stems]  # documents that failed to ingest are left out
    if len(questions) < len(all_questions):
        print(f"note: {len(all_questions) - len(questions)} questions skipped: their document is not in the workspace")
    print(f"{len(pages)} pages, {len(stems)} documents, {len(questions)} answerable questions; "
          f"{sum(1 for p in pages if p.tables_md)} pages with table markdown; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")

    report: dict = {"variants": {}}
    retrievers, cost = build_retrievers(ws, pages, titles, args.dense_model, args.force_index,
                                        not (args.bm25_only or args.dense_cached))
    if args.dense_cached:
        dense, done = cached_dense(ws, pages)
        retrievers["dense"] = dense
        retrievers["hybrid"] = HybridSearcher([("bm25", retrievers["bm25"], 1.0), ("dense", dense, 1.0)])
        questions = [q for q in questions if q["stem"] in done]
        print(f"--dense-cached: {len(done)} documents embedded so far; every row on their {len(questions)} questions")
        report["dense_cached_docs"] = sorted(done)
    aliases = _aliases(ws)
    report.update({"pages": len(pages), "questions": len(questions), "index_cost": cost, "aliases": aliases})
    types = sorted({q["type"] for q in questions})
    cols = ["all", FINANCIAL, *types]
    print("\nper-document recall (R@1 / R@5 / R@10), by document type; n = questions")
    print("| retriever | queries | " + " | ".join(f"{c} (n={sum(1 for q in questions if c in ('all', q['type']) or (c == FINANCIAL and q['type'].startswith('Financial')))})"
                                          for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for name, searcher in retrievers.items():
        for rewrite, opts in REWRITES.items():
            if name == "bm25 before" and opts is not None:
                continue
            s = searcher if opts is None else NormalizedSearcher(searcher, opts, aliases)
            t = time.process_time()
            m = recall_by_type(s, questions)
            cpu = time.process_time() - t
            report["variants"][f"{name} | {rewrite}"] = {"recall": m, "query_cpu_ms": round(1000 * cpu / len(questions), 2)}
            cells = [f"{m[c]['R@1']} / **{m[c]['R@5']}** / {m[c]['R@10']}" if c in m else "-" for c in cols]
            print(f"| {name} | {rewrite} | " + " | ".join(cells) + " |", flush=True)
    print("\nindex build cost:", json.dumps(cost))
    print(f"load average at the end: {os.getloadavg()}")
    if args.bm25_ablation:
        report["bm25_ablation"] = bm25_ablation(pages, titles, questions)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
