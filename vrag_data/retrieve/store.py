"""What the index builders share: the build result, small JSON files next to an index, the pages to index."""

from __future__ import annotations

import json

import fsspec
from pydantic import BaseModel, ConfigDict

from vrag_data.errors import VragError
from vrag_data.schema.records import Document, Page
from vrag_data.store import Workspace, read_records


class IndexBuildResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    retriever: str
    path: str
    n_pages: int
    n_docs: int
    n_terms: int = 0
    up_to_date: bool = False  # nothing changed, nothing rebuilt
    changed_docs: int = 0  # documents re-analysed
    reused_docs: int = 0  # documents whose cached term counts were reused
    empty_pages: int = 0  # pages with no indexable text (image-only pages without OCR)
    seconds: float = 0.0

    @property
    def message(self) -> str:
        if self.up_to_date:
            return f"index up to date ({self.retriever}, {self.n_pages} pages, {self.n_docs} documents)"
        return (f"built {self.retriever} index: {self.n_pages} pages, {self.n_docs} documents, {self.n_terms} "
                f"terms; {self.changed_docs} documents analysed, {self.reused_docs} reused, "
                f"{self.empty_pages} pages without text ({self.seconds:.1f}s)")


def fs_and_path(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    return fsspec.core.url_to_fs(path)


def read_json(path: str) -> dict | None:
    fs, p = fs_and_path(path)
    if not fs.exists(p):
        return None
    try:
        with fs.open(p, "r") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None  # a damaged manifest only means "rebuild"


def write_json(path: str, obj: object) -> None:
    fs, p = fs_and_path(path)
    fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{p}.tmp"
    with fs.open(tmp, "w") as f:
        json.dump(obj, f, ensure_ascii=False)
    fs.mv(tmp, p)


def load_pages(ws: Workspace) -> tuple[list[Page], dict[str, str]]:
    """Pages grouped by document and in page order, and document titles by stem."""
    pages = read_records(ws.corpus_table("pages"), Page)
    if not pages:
        raise VragError(f"{ws.corpus_table('pages')}: no pages to index; run `vrag-data ingest` first")
    seen: dict[str, Page] = {}
    for p in pages:
        seen.setdefault(p.page_id, p)  # a page ingested twice is indexed once
    titles = {d.stem: d.title for d in read_records(ws.corpus_table("documents"), Document)}
    return sorted(seen.values(), key=lambda p: (p.stem, p.page)), titles
