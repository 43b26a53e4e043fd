"""What the index builders share: the build result, small JSON files next to an index, the pages to index."""

from __future__ import annotations

import json

import fsspec
from pydantic import BaseModel, ConfigDict, Field

from vrag_data.errors import VragError
from vrag_data.retrieve.finance_vocab import statement_titles
from vrag_data.schema.records import Document, Page, TocEntry
from vrag_data.store import Workspace, read_records
from vrag_data.store.tempfiles import temp_name


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
    cpu_seconds: float = 0.0  # process CPU time of the build (what a page costs on an unloaded core)
    parts: list[IndexBuildResult] = Field(default_factory=list)  # a hybrid index: one result per component

    @property
    def message(self) -> str:
        if self.parts:
            return "; ".join(p.message for p in self.parts)
        if self.up_to_date:
            return f"index up to date ({self.retriever}, {self.n_pages} pages, {self.n_docs} documents)"
        terms = f", {self.n_terms} terms" if self.n_terms else ""
        per_page = f", {1000 * self.seconds / max(self.n_pages, 1):.1f} ms/page" if self.n_pages else ""
        return (f"built {self.retriever} index: {self.n_pages} pages, {self.n_docs} documents{terms}; "
                f"{self.changed_docs} documents analysed, {self.reused_docs} reused, "
                f"{self.empty_pages} pages without text ({self.seconds:.1f}s{per_page})")


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
    tmp = temp_name(p)  # `.tmp-<pid>-<name>`: a killed writer's is swept by the next stage
    try:
        with fs.open(tmp, "w") as f:
            json.dump(obj, f, ensure_ascii=False)
        fs.mv(tmp, p)
    except BaseException:  # a full disk, an interrupt: no half-written temp file stays
        if fs.exists(tmp):
            fs.rm(tmp)
        raise


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


def page_sections(pages: list[Page], tocs: dict[str, list[TocEntry]]) -> dict[str, str]:
    """Page-level fields by page id: the outline headings that cover the page (the last entry at or before it
    on each level, outermost first) and the canonical names of the financial statements whose title opens it."""
    out: dict[str, str] = {}
    for p in pages:
        chain: dict[int, str] = {}
        for e in tocs.get(p.stem, []):
            if e.page <= p.page:
                chain[e.level] = e.title.strip()
                for deeper in [lv for lv in chain if lv > e.level]:
                    del chain[deeper]  # a new heading closes the sub-headings of the previous one
        body = p.text if p.text.strip() else p.ocr_text
        parts = [chain[lv] for lv in sorted(chain)] + statement_titles(body)
        out[p.page_id] = " | ".join(x for x in parts if x)
    return out


def load_sections(ws: Workspace, pages: list[Page]) -> dict[str, str]:
    tocs = {d.stem: d.toc for d in read_records(ws.corpus_table("documents"), Document)}
    return page_sections(pages, tocs)
