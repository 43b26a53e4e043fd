"""Build, persist and open page indexes under `<workspace>/index/`.

Layout: `index/bm25/{manifest.json, postings.npz, terms.json, terms/<stem>.json}`, `index/dense/...`,
`index/colpali/...`, `index/hybrid/manifest.json` (components, fusion weights), `index/aliases.json` (tickers ->
company names, for query normalisation) and `index/current.json` naming the retriever built last and the query
rewrites (what `load_index` opens by default).

The manifest holds a content hash per page (text layer, OCR, tables, document title) plus the analyser and
scoring parameters. A build whose inputs hash the same is skipped ("index up to date"). When pages did change,
only the documents whose pages changed are re-tokenised (the per-document term counts are cached); the
score arrays are then recomputed for everything because corpus statistics (IDF, average length) move.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Literal

import numpy as np

from vrag_data.config import IndexConfig
from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.retrieve.base import Searcher
from vrag_data.retrieve.bm25 import BM25Index, Bm25Params, PageMeta, build_postings, weighted_tf
from vrag_data.retrieve.finance_vocab import statement_titles
from vrag_data.retrieve.normalize import QueryOptions, document_aliases
from vrag_data.retrieve.searchers import HybridSearcher, NormalizedSearcher
from vrag_data.retrieve.text import analyser_id, bigrams, page_labels, page_term, statement_term, tokenize
from vrag_data.schema.records import Page
from vrag_data.retrieve.store import IndexBuildResult, fs_and_path, load_pages, load_sections, read_json, write_json
from vrag_data.store import Workspace

Retriever = Literal["bm25", "dense", "hybrid", "colpali"]
FORMAT = 1
Progress = Callable[[int, int], None]  # (done, total) documents


def page_fields(page: Page, title: str, head_lines: int, section: str = "") -> dict[str, str]:
    body = page.text if page.text.strip() else page.ocr_text
    head = "\n".join([ln for ln in body.splitlines() if ln.strip()][:head_lines])
    return {
        "text": page.text,
        "ocr": page.ocr_text,
        "tables": "\n".join(page.tables_md),
        # The file stem often names the company/report ("AMAZON_2017_10K"); it helps corpus-wide queries.
        "title": f"{title}\n{page.stem.replace('_', ' ').replace('-', ' ')}",
        "head": head,
        "section": section,  # outline headings and statement names (`store.page_sections`)
    }


def page_hash(page: Page, title: str, section: str = "") -> str:
    return short_hash(page.text, page.ocr_text, page.tables_md, title, page.doc_id, page.page, section)


def page_terms(page: Page, title: str, head_lines: int, section: str = "") -> dict[str, dict[str, int]]:
    """Term counts per field, plus adjacent-term pairs of the body fields."""
    out: dict[str, dict[str, int]] = {}
    pairs: Counter[str] = Counter()
    for name, text in page_fields(page, title, head_lines, section).items():
        tokens = tokenize(text)
        out[name] = dict(Counter(tokens))
        if name in ("text", "ocr", "tables"):
            pairs.update(bigrams(tokens))
    out["bigram"] = dict(pairs)
    body = page.text if page.text.strip() else page.ocr_text
    out["label"] = {page_term(n): 1 for n in sorted(page_labels(body) | {page.page})}
    out["statement"] = {statement_term(name): 1 for name in statement_titles(body)}
    return out


def _doc_terms(pages: list[Page], title: str, head_lines: int, sections: dict[str, str]
               ) -> list[dict[str, dict[str, int]]]:
    return [page_terms(p, title, head_lines, sections.get(p.page_id, "")) for p in pages]


def index_pages(pages: list[Page], titles: dict[str, str], params: Bm25Params | None = None,
                sections: dict[str, str] | None = None) -> BM25Index:
    """An in-memory BM25 index over `pages` (grouped by document), nothing persisted (benchmarks, tests)."""
    params = params or Bm25Params()
    pages = sorted(pages, key=lambda p: (p.stem, p.page))
    sections = sections or {}
    stems = list(dict.fromkeys(p.stem for p in pages))
    doc_of = {s: i for i, s in enumerate(stems)}
    tfs = [weighted_tf(page_terms(p, titles.get(p.stem, ""), params.head_lines, sections.get(p.page_id, "")), params)
           for p in pages]
    vocab, corpus, docscope = build_postings(tfs, np.asarray([doc_of[p.stem] for p in pages]), params)
    return BM25Index([PageMeta(p.page_id, p.doc_id, p.stem, p.page) for p in pages], vocab, corpus, docscope,
                     params)


def build_bm25(ws: Workspace, params: Bm25Params | None = None, progress: Progress | None = None,
               force: bool = False) -> IndexBuildResult:
    t0, c0 = time.perf_counter(), time.process_time()
    params = params or Bm25Params()
    root = ws.path("index", "bm25")
    pages, titles = load_pages(ws)
    sections = load_sections(ws, pages)
    hashes = {p.page_id: page_hash(p, titles.get(p.stem, ""), sections[p.page_id]) for p in pages}
    by_doc: dict[str, list[Page]] = {}
    for p in pages:
        by_doc.setdefault(p.stem, []).append(p)
    doc_hash = {stem: short_hash(analyser_id(), params.head_lines, [hashes[p.page_id] for p in ps])
                for stem, ps in by_doc.items()}
    want = {"format": FORMAT, "retriever": "bm25", "analyser": analyser_id(), "params": params.model_dump(),
            "docs": doc_hash}
    old = read_json(f"{root}/manifest.json")
    fs, root_p = fs_and_path(root)
    if (not force and old is not None and {k: old.get(k) for k in want} == want
            and fs.exists(f"{root_p}/postings.npz") and fs.exists(f"{root_p}/terms.json")):
        return IndexBuildResult(retriever="bm25", path=root, n_pages=len(pages), n_docs=len(by_doc),
                                n_terms=int(old.get("n_terms", 0)), up_to_date=True,
                                seconds=time.perf_counter() - t0)

    page_tfs: list[dict[str, float]] = []
    page_doc: list[int] = []
    changed = reused = empty = 0
    for d, (stem, ps) in enumerate(by_doc.items()):
        cache_path = f"{root}/terms/{stem}.json"
        cached = read_json(cache_path)
        if cached is not None and cached.get("hash") == doc_hash[stem]:
            fields = cached["pages"]
            reused += 1
        else:
            fields = _doc_terms(ps, titles.get(stem, ""), params.head_lines, sections)
            write_json(cache_path, {"hash": doc_hash[stem], "pages": fields})
            changed += 1
        for f in fields:
            tf = weighted_tf(f, params)
            if not any(f.get(k) for k in ("text", "ocr", "tables")):
                empty += 1
            page_tfs.append(tf)
            page_doc.append(d)
        if progress:
            progress(d + 1, len(by_doc))
    _drop_stale_term_caches(root, set(by_doc))

    vocab, corpus, docscope = build_postings(page_tfs, np.asarray(page_doc), params)
    metas = [PageMeta(p.page_id, p.doc_id, p.stem, p.page) for p in pages]
    BM25Index(metas, vocab, corpus, docscope, params).save(root)
    manifest = {**want, "pages": hashes, "n_pages": len(pages), "n_terms": len(vocab),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(f"{root}/manifest.json", manifest)  # written last: a crash mid-build means "rebuild"
    return IndexBuildResult(retriever="bm25", path=root, n_pages=len(pages), n_docs=len(by_doc),
                            n_terms=len(vocab), changed_docs=changed, reused_docs=reused, empty_pages=empty,
                            seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def _drop_stale_term_caches(root: str, stems: set[str]) -> None:
    fs, p = fs_and_path(f"{root}/terms")
    if not fs.exists(p):
        return
    for f in fs.ls(p, detail=False):
        name = f.rsplit("/", 1)[-1]
        if name.endswith(".json") and name[: -len(".json")] not in stems:
            fs.rm(f)


# -- what the workspace's index is, and opening it --------------------------------------------------------------


def _aliases(ws: Workspace) -> dict[str, str]:
    """Tickers printed on the first pages of each document -> its company name (query normalisation)."""
    pages, titles = load_pages(ws)
    head: dict[str, list[str]] = {}
    for p in pages:
        if p.page <= 3:
            head.setdefault(p.stem, []).append(p.text or p.ocr_text)
    return document_aliases((stem, titles.get(stem, ""), "\n".join(texts)) for stem, texts in head.items())


def build_index(ws: Workspace, retriever: Retriever = "bm25", model_path: str | None = None,
                params: Bm25Params | None = None, progress: Progress | None = None,
                force: bool = False, dense_model: str | None = None, weights: dict[str, float] | None = None,
                rrf_k: float = 60.0, query: QueryOptions | None = QueryOptions()) -> IndexBuildResult:
    """Build (or confirm up to date) the index of `ws`'s pages. Raises `VragError` with a one-line message.

    `hybrid` builds BM25 and dense (and ColPali when `model_path` names its weights) and fuses them with
    weights `weights` (by component name; default 1 each). `query`: the query rewrites every searcher opened
    with `load_index` applies (`None`: queries go to the index as given). `index/current.json` records it all."""
    if retriever == "bm25":
        result = build_bm25(ws, params, progress, force)
    elif retriever == "dense":
        from vrag_data.retrieve.dense import build_dense

        result = build_dense(ws, dense_model, progress, force)
    elif retriever == "colpali":
        from vrag_data.retrieve.colpali import build_colpali

        result = build_colpali(ws, model_path, progress, force)
    elif retriever == "hybrid":
        from vrag_data.retrieve.dense import build_dense

        parts = [build_bm25(ws, params, progress, force), build_dense(ws, dense_model, progress, force)]
        if model_path:
            from vrag_data.retrieve.colpali import build_colpali

            parts.append(build_colpali(ws, model_path, progress, force))
        w = {p.retriever: 1.0 for p in parts} | {k: v for k, v in (weights or {}).items()}
        unknown = set(w) - {p.retriever for p in parts}
        if unknown:
            raise VragError(f"index weights name {sorted(unknown)}, which this hybrid index does not hold "
                            f"({[p.retriever for p in parts]}); colpali needs --model-path")
        write_json(ws.path("index", "hybrid", "manifest.json"),
                   {"retriever": "hybrid", "components": [p.retriever for p in parts], "weights": w, "rrf_k": rrf_k})
        result = IndexBuildResult(retriever="hybrid", path=ws.path("index", "hybrid"), n_pages=parts[0].n_pages,
                                  n_docs=parts[0].n_docs, up_to_date=all(p.up_to_date for p in parts),
                                  seconds=sum(p.seconds for p in parts),
                                  cpu_seconds=sum(p.cpu_seconds for p in parts), parts=parts)
    else:
        raise VragError(f"unknown retriever {retriever!r}; use bm25, dense, hybrid or colpali")
    write_json(ws.path("index", "aliases.json"), _aliases(ws))
    write_json(ws.path("index", "current.json"),
               {"retriever": retriever, "query": query.model_dump() if query is not None else None})
    return result


def build_from_config(ws: Workspace, cfg: IndexConfig, progress: Progress | None = None,
                      force: bool = False) -> IndexBuildResult:
    """`build_index` with the run config's `index:` section."""
    return build_index(ws, cfg.retriever, cfg.model_path, progress=progress, force=force, dense_model=cfg.dense_model,
                       weights=cfg.weights or None, rrf_k=cfg.rrf_k,
                       query=QueryOptions() if cfg.normalize_queries else None)


def ensure_index(ws: Workspace, cfg: IndexConfig) -> tuple[Searcher, bool]:
    """The index step before a stage that searches: the workspace's index opened, or built with the run config's
    `index:` section when there is none (or rebuilt when it was written in an older format). Returns the searcher and
    whether it was built now."""
    try:
        return load_index(ws), False
    except VragError:  # no index yet
        build_from_config(ws, cfg)
    except (ValueError, KeyError):  # an index written by an older format: rebuild it
        build_from_config(ws, cfg, force=True)
    return load_index(ws), True


def _open(ws: Workspace, retriever: str) -> Searcher:
    root = ws.path("index", retriever)
    manifest = read_json(f"{root}/manifest.json")
    if manifest is None:
        raise VragError(f"{root}: no {retriever} index; run `vrag-data index -w {ws.root} --retriever {retriever}`")
    if retriever == "bm25":
        return BM25Index.load(root)
    if retriever == "dense":
        from vrag_data.retrieve.dense import DenseIndex

        return DenseIndex.load(root)
    if retriever == "hybrid":
        w = manifest["weights"]
        return HybridSearcher([(c, _open(ws, c), float(w.get(c, 1.0))) for c in manifest["components"]],
                              k=float(manifest.get("rrf_k", 60.0)))
    if retriever == "colpali":
        from vrag_data.retrieve.colpali import ColPaliIndex

        return ColPaliIndex.load(root)
    raise VragError(f"{ws.path('index', 'current.json')}: unknown retriever {retriever!r}; re-run `vrag-data index`")


def load_index(ws: Workspace, retriever: Retriever | None = None) -> Searcher:
    """Open the index built last (or the named one), behind the query rewrites it was built with (see
    `index/current.json`; an index from before they existed gets the default rewrites). Raises `VragError`
    when there is none."""
    current = read_json(ws.path("index", "current.json")) or {}
    retriever = retriever or current.get("retriever", "bm25")
    searcher = _open(ws, retriever)
    query = current.get("query", QueryOptions().model_dump())
    if query is None:
        return searcher
    return NormalizedSearcher(searcher, QueryOptions(**query), read_json(ws.path("index", "aliases.json")) or {})


def index_kind(searcher: Searcher) -> str:
    """What a searcher is, for manifests: "normalized(hybrid(bm25:1+dense:1,rrf_k=60))"."""
    return str(getattr(searcher, "kind", type(searcher).__name__))
