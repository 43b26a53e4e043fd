"""ColPali / ColQwen page retrieval through `colpali-engine` with local weights (the `colpali` extra).

Nothing here downloads: the model directory must already hold the checkpoint. Without the package or the
weights the build stops with one line that names what is missing and points at `--retriever bm25`.
Page embeddings (multi-vector, one tensor per page) are cached per document under `index/colpali/emb/`,
keyed by a hash of the page images, so a rebuild only embeds documents whose images changed.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from vrag_data.errors import MissingComponent, VragError
from vrag_data.ids import sha256_file, short_hash
from vrag_data.retrieve.base import SearchHit
from vrag_data.retrieve.bm25 import PageMeta, UnknownDocument

_FALLBACK = "or index with `--retriever bm25`"
# model_type in config.json -> (model class, processor class) in colpali_engine.models
_CLASSES = {
    "colqwen2_5": ("ColQwen2_5", "ColQwen2_5_Processor"),
    "qwen2_5_vl": ("ColQwen2_5", "ColQwen2_5_Processor"),
    "colqwen2": ("ColQwen2", "ColQwen2Processor"),
    "qwen2_vl": ("ColQwen2", "ColQwen2Processor"),
    "colpali": ("ColPali", "ColPaliProcessor"),
    "paligemma": ("ColPali", "ColPaliProcessor"),
}


def check_colpali(model_path: str | None) -> tuple[str, str, str]:
    """(model dir, model class, processor class), or `MissingComponent` naming what is missing."""
    missing = []
    if importlib.util.find_spec("colpali_engine") is None:
        missing.append("the colpali-engine package (the colpali extra: pip install colpali-engine==0.3.18)")
    cfg_file = Path(model_path or "") / "config.json"
    if not model_path:
        missing.append("local ColPali/ColQwen weights (pass --model-path DIR)")
    elif not cfg_file.is_file():
        missing.append(f"local ColPali/ColQwen weights ({model_path} has no config.json)")
    if missing:
        raise MissingComponent("colpali retriever needs " + " and ".join(missing) + f"; {_FALLBACK}")
    cfg = json.loads(cfg_file.read_text())
    kind = str(cfg.get("model_type", "")).lower()
    if kind not in _CLASSES:
        raise MissingComponent(f"{cfg_file}: model_type {kind!r} is not a ColPali/ColQwen checkpoint "
                               f"(known: {sorted(_CLASSES)}); {_FALLBACK}")
    model_cls, proc_cls = _CLASSES[kind]
    return str(model_path), model_cls, proc_cls


def _load_model(model_path: str, model_cls: str, proc_cls: str) -> tuple[Any, Any]:
    import torch
    from colpali_engine import models  # type: ignore[import-not-found]

    model = getattr(models, model_cls).from_pretrained(model_path, torch_dtype=torch.float32,
                                                       device_map="cpu", local_files_only=True).eval()
    processor = getattr(models, proc_cls).from_pretrained(model_path, local_files_only=True)
    return model, processor


def build_colpali(ws: Any, model_path: str | None, progress: Any = None, force: bool = False) -> Any:
    model_dir, model_cls, proc_cls = check_colpali(model_path)  # before importing torch: a missing part fails fast
    from PIL import Image
    import torch

    from vrag_data.retrieve.store import IndexBuildResult, load_pages, read_json, write_json

    t0 = time.perf_counter()
    root = ws.path("index", "colpali")
    pages, _ = load_pages(ws)
    by_doc: dict[str, list] = {}
    for p in pages:
        by_doc.setdefault(p.stem, []).append(p)
    doc_hash = {s: short_hash(model_dir, [sha256_file(ws.page_image(p.page_id)) for p in ps])
                for s, ps in by_doc.items()}
    want = {"retriever": "colpali", "model": model_dir, "docs": doc_hash}
    old = read_json(f"{root}/manifest.json")
    if not force and old is not None and {k: old.get(k) for k in want} == want:
        write_json(ws.path("index", "current.json"), {"retriever": "colpali"})
        return IndexBuildResult(retriever="colpali", path=root, n_pages=len(pages), n_docs=len(by_doc),
                                up_to_date=True, seconds=time.perf_counter() - t0)
    model, processor = _load_model(model_dir, model_cls, proc_cls)
    changed = reused = 0
    for d, (stem, ps) in enumerate(by_doc.items()):
        emb_path = f"{root}/emb/{stem}.pt"
        prev = (old or {}).get("docs", {}).get(stem)
        if prev == doc_hash[stem] and Path(emb_path).is_file():
            reused += 1
            continue
        embs: list[Any] = []
        for i in range(0, len(ps), 4):
            images = [Image.open(ws.page_image(p.page_id)).convert("RGB") for p in ps[i:i + 4]]
            with torch.no_grad():
                out = model(**processor.process_images(images))
            embs.extend(e.to(torch.float16) for e in torch.unbind(out))
        Path(emb_path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(embs, emb_path)
        changed += 1
        if progress:
            progress(d + 1, len(by_doc))
    metas = [[p.page_id, p.doc_id, p.stem, p.page] for p in pages]
    write_json(f"{root}/pages.json", metas)
    write_json(f"{root}/manifest.json", {**want, "model_class": model_cls, "processor_class": proc_cls,
                                          "n_pages": len(pages)})
    write_json(ws.path("index", "current.json"), {"retriever": "colpali"})
    return IndexBuildResult(retriever="colpali", path=root, n_pages=len(pages), n_docs=len(by_doc),
                            changed_docs=changed, reused_docs=reused, seconds=time.perf_counter() - t0)


class ColPaliIndex:
    """Late-interaction (MaxSim) search over cached page embeddings; implements `Searcher`."""

    def __init__(self, root: str, manifest: dict, pages: list[PageMeta]) -> None:
        import torch

        check_colpali(manifest["model"])
        self.pages = pages
        self.model, self.processor = _load_model(manifest["model"], manifest["model_class"],
                                                 manifest["processor_class"])
        self.embeddings: list[Any] = []
        for stem in dict.fromkeys(p.stem for p in pages):
            self.embeddings.extend(torch.load(f"{root}/emb/{stem}.pt"))
        self.doc_stems = {p.doc_id: p.stem for p in pages}

    @classmethod
    def load(cls, root: str) -> ColPaliIndex:
        manifest = json.loads(Path(root, "manifest.json").read_text())
        if not Path(root, "pages.json").is_file():
            raise VragError(f"{root}: incomplete colpali index; re-run `vrag-data index --retriever colpali`")
        pages = [PageMeta(*r) for r in json.loads(Path(root, "pages.json").read_text())]
        return cls(root, manifest, pages)

    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        import torch

        scope = [i for i, p in enumerate(self.pages) if doc_stem is None or p.stem == doc_stem]
        if doc_stem is not None and not scope:
            raise UnknownDocument(f"document {doc_stem!r} is not in the index")
        with torch.no_grad():
            q = self.model(**self.processor.process_queries(queries))
        scores = self.processor.score_multi_vector(list(torch.unbind(q)),
                                                   [self.embeddings[i].float() for i in scope])
        out = []
        for row in scores:
            order = torch.argsort(row, descending=True, stable=True)[:top_k].tolist()
            out.append([SearchHit(page_id=self.pages[scope[j]].page_id, doc_id=self.pages[scope[j]].doc_id,
                                  stem=self.pages[scope[j]].stem, page=self.pages[scope[j]].page,
                                  score=float(row[j])) for j in order])
        return out
