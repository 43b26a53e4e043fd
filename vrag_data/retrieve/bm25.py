"""BM25 over page text in two scopes: the whole corpus, and each document on its own.

Scores are precomputed per (term, page) at build time, so a query is a handful of array slices and one
`bincount`: thousands of queries per second on a few thousand pages, no per-query allocation of the vocabulary.
The per-document scope has its own statistics (document frequency, page count, average page length taken
within the document), which is what "BM25 within the question's document" means in MMLongBench-Doc style
evaluation; slicing the corpus-wide scores would rank with the wrong IDF.

Postings for each term are sorted by page index and pages are stored grouped by document, so a document
scope is a contiguous page range found with a binary search inside each posting list.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import fsspec
import numpy as np
from pydantic import BaseModel, ConfigDict

from vrag_data.errors import VragError
from vrag_data.retrieve.base import SearchHit
from vrag_data.retrieve.finance_vocab import statements_named
from vrag_data.retrieve.normalize import EXPANSION_MARK
from vrag_data.retrieve.text import bigrams, page_refs, page_term, statement_term, tokenize

FIELDS = ("text", "ocr", "tables", "title", "head", "bigram", "label", "section", "statement")


class Bm25Params(BaseModel):
    """Scoring parameters; part of the manifest, so changing one triggers a rebuild."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k1: float = 1.2
    b: float = 0.75
    # Field weights multiply term frequencies (a simple BM25F): text layer, OCR text, table markdown,
    # document title (repeated on every page of the document) and the page's first lines (headings).
    w_text: float = 1.0
    w_ocr: float = 1.0
    w_tables: float = 1.0
    w_title: float = 0.0
    w_head: float = 1.0
    head_lines: int = 3
    # Pairs of adjacent terms as extra terms ("net revenue" beats "net ... revenue" far apart).
    w_bigram: float = 0.5
    # Explicit page references ("on page 14"): pages whose PDF number or printed number matches.
    w_label: float = 3.0
    # Page-level fields: outline headings covering the page and the name of the financial statement whose title
    # opens it (`section`), and a tag term for that statement that only a query naming it produces (`statement`):
    # "balance sheet" then finds the balance sheet before the notes that mention it again and again.
    w_section: float = 1.0
    w_statement: float = 3.0
    # Terms that query normalisation appended (after `EXPANSION_MARK`: a metric's line items and statements)
    # count this much: they point at the statements, but a page that prints the metric itself should still win.
    w_expansion: float = 0.5


class UnknownDocument(VragError):
    """A document scope that the index does not contain."""


@dataclass(frozen=True)
class PageMeta:
    page_id: str
    doc_id: str
    stem: str
    page: int


@dataclass
class Postings:
    """Sparse term x page matrix in CSR-by-term form: term t owns indices/data[indptr[t]:indptr[t+1]]."""

    indptr: np.ndarray  # int64, len = n_terms + 1
    indices: np.ndarray  # int32 page index, ascending within a term
    data: np.ndarray  # float32 BM25 contribution


def weighted_tf(fields: Mapping[str, Mapping[str, int]], params: Bm25Params) -> dict[str, float]:
    """Combine per-field term counts with the field weights."""
    weights = {"text": params.w_text, "ocr": params.w_ocr, "tables": params.w_tables,
               "title": params.w_title, "head": params.w_head, "bigram": params.w_bigram,
               "label": params.w_label, "section": params.w_section,
               "statement": params.w_statement}
    out: dict[str, float] = {}
    for name, counts in fields.items():
        w = weights.get(name, 0.0)
        if w <= 0:
            continue
        for term, n in counts.items():
            out[term] = out.get(term, 0.0) + w * n
    return out


def _bm25(tf: np.ndarray, df: np.ndarray, n_docs: np.ndarray, dl: np.ndarray, avgdl: np.ndarray,
          k1: float, b: float) -> np.ndarray:
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    norm = k1 * (1.0 - b + b * dl / np.maximum(avgdl, 1e-9))
    return (idf * tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)


def build_postings(page_tfs: Sequence[Mapping[str, float]], page_doc: np.ndarray, params: Bm25Params
                   ) -> tuple[list[str], Postings, Postings]:
    """Vocabulary plus corpus-scope and document-scope postings. `page_doc[i]` is page i's document
    index; pages must be grouped by document (non-decreasing `page_doc`)."""
    vocab = sorted({t for tf in page_tfs for t in tf})
    term_id = {t: i for i, t in enumerate(vocab)}
    n_pages = len(page_tfs)
    rows, cols, vals = [], [], []
    for p, tf in enumerate(page_tfs):
        for t, v in tf.items():
            rows.append(term_id[t])
            cols.append(p)
            vals.append(v)
    r = np.asarray(rows, dtype=np.int64)
    c = np.asarray(cols, dtype=np.int32)
    tf = np.asarray(vals, dtype=np.float64)
    order = np.lexsort((c, r))
    r, c, tf = r[order], c[order], tf[order]
    dl = np.array([sum(x.values()) for x in page_tfs], dtype=np.float64)
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.add.at(indptr, r + 1, 1)
    indptr = np.cumsum(indptr)

    # corpus scope
    df_corpus = np.diff(indptr)[r].astype(np.float64)
    avg_all = dl.mean() if n_pages else 0.0
    corpus = Postings(indptr, c, _bm25(tf, df_corpus, np.float64(n_pages), dl[c], np.float64(avg_all),
                                       params.k1, params.b))

    # document scope: statistics within each page's own document
    doc = page_doc.astype(np.int64)
    n_doc_pages = np.bincount(doc, minlength=int(doc.max()) + 1 if n_pages else 0).astype(np.float64)
    avg_doc = np.bincount(doc, weights=dl) / np.maximum(n_doc_pages, 1.0)
    key = r * (len(n_doc_pages) or 1) + doc[c]
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    df_doc = counts[inverse].astype(np.float64)
    docscope = Postings(indptr, c, _bm25(tf, df_doc, n_doc_pages[doc[c]], dl[c], avg_doc[doc[c]],
                                         params.k1, params.b))
    return vocab, corpus, docscope


class BM25Index:
    """Implements `Searcher`. Build with `vrag_data.retrieve.build_index`, open with `load_index`."""

    def __init__(self, pages: list[PageMeta], vocab: list[str], corpus: Postings, docscope: Postings,
                 params: Bm25Params) -> None:
        self.pages = pages
        self.params = params
        self.vocab = vocab
        self._term_id = {t: i for i, t in enumerate(vocab)}
        self._corpus = corpus
        self._doc = docscope
        self._ranges: dict[str, tuple[int, int]] = {}
        for i, p in enumerate(pages):
            lo, _ = self._ranges.get(p.stem, (i, i))
            self._ranges[p.stem] = (lo, i + 1)
        self.doc_stems = {p.doc_id: p.stem for p in pages}

    # -- querying -----------------------------------------------------------------------------------
    def _terms(self, query: str) -> list[int]:
        terms = tokenize(query)
        if self.params.w_bigram > 0:
            terms += bigrams(terms)
        if self.params.w_label > 0:
            terms += [page_term(n) for n in page_refs(query)]
        if self.params.w_statement > 0:
            terms += [statement_term(s) for s in statements_named(query)]
        ids = {self._term_id.get(t) for t in terms}
        ids.discard(None)
        return sorted(ids)  # type: ignore[arg-type]

    def scores(self, query: str, doc_stem: str | None = None) -> tuple[np.ndarray, int]:
        """Scores for the pages in scope and the page index of the first one."""
        main, _, extra = query.partition(EXPANSION_MARK)
        terms = self._terms(main)
        added = sorted(set(self._terms(extra)) - set(terms)) if extra and self.params.w_expansion > 0 else []
        weight = [1.0] * len(terms) + [self.params.w_expansion] * len(added)
        terms = terms + added
        if doc_stem is None:
            lo, hi, post = 0, len(self.pages), self._corpus
        else:
            if doc_stem not in self._ranges:
                raise UnknownDocument(f"document {doc_stem!r} is not in the index; re-run `vrag-data index` "
                                      "after ingesting it, or search without a document scope")
            (lo, hi), post = self._ranges[doc_stem], self._doc
        idx_parts, val_parts = [], []
        for t, w in zip(terms, weight):
            s, e = int(post.indptr[t]), int(post.indptr[t + 1])
            seg = post.indices[s:e]
            if doc_stem is not None:
                a, z = np.searchsorted(seg, (lo, hi))
                s, e, seg = s + a, s + z, seg[a:z]
            idx_parts.append(seg)
            val_parts.append(post.data[s:e] * np.float32(w) if w != 1.0 else post.data[s:e])
        if not idx_parts:
            return np.zeros(hi - lo, dtype=np.float64), lo
        idx = np.concatenate(idx_parts) - lo
        return np.bincount(idx, weights=np.concatenate(val_parts), minlength=hi - lo), lo

    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        """Best `top_k` pages per query, highest score first, ties by page order. Pages that match no
        query term fill the list (score 0) so a client always gets `top_k` results when the scope has them."""
        out: list[list[SearchHit]] = []
        for q in queries:
            scores, lo = self.scores(q, doc_stem)
            k = min(max(top_k, 0), len(scores))
            nz = np.flatnonzero(scores > 0)
            ranked = nz[np.lexsort((nz, -scores[nz]))][:k]
            if len(ranked) < k:
                zero = np.flatnonzero(scores <= 0)[: k - len(ranked)]
                ranked = np.concatenate([ranked, zero])
            hits = []
            for j in ranked.tolist():
                m = self.pages[lo + j]
                hits.append(SearchHit(page_id=m.page_id, doc_id=m.doc_id, stem=m.stem, page=m.page,
                                      score=float(scores[j])))
            out.append(hits)
        return out

    # -- persistence --------------------------------------------------------------------------------
    def save(self, directory: str) -> None:
        fs, root = fsspec.core.url_to_fs(directory)
        fs.makedirs(root, exist_ok=True)
        buf = io.BytesIO()
        np.savez(buf, corpus_indptr=self._corpus.indptr, corpus_indices=self._corpus.indices,
                 corpus_data=self._corpus.data, doc_indptr=self._doc.indptr, doc_indices=self._doc.indices,
                 doc_data=self._doc.data)
        with fs.open(f"{root}/postings.npz", "wb") as f:
            f.write(buf.getvalue())
        meta = {"params": self.params.model_dump(), "vocab": self.vocab,
                "pages": [[p.page_id, p.doc_id, p.stem, p.page] for p in self.pages]}
        with fs.open(f"{root}/terms.json", "w") as f:
            json.dump(meta, f, ensure_ascii=False)

    @classmethod
    def load(cls, directory: str) -> BM25Index:
        fs, root = fsspec.core.url_to_fs(directory)
        with fs.open(f"{root}/terms.json", "r") as f:
            meta = json.load(f)
        with fs.open(f"{root}/postings.npz", "rb") as f:
            z = np.load(io.BytesIO(f.read()))
            corpus = Postings(z["corpus_indptr"], z["corpus_indices"], z["corpus_data"])
            doc = Postings(z["doc_indptr"], z["doc_indices"], z["doc_data"])
        pages = [PageMeta(*row) for row in meta["pages"]]
        return cls(pages, meta["vocab"], corpus, doc, Bm25Params(**meta["params"]))
