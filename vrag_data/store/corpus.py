"""The corpus tables of a workspace: per-document shards `corpus/{documents,pages,layout}/<stem>.parquet`
and one `corpus/errors.parquet` (ingest errors, accumulating)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from vrag_data.schema.records import Document, IngestError, LayoutBlock, Page
from vrag_data.store.shards import read_records, write_records
from vrag_data.store.workspace import Workspace

TABLES = ("documents", "pages", "layout")


def shard_path(ws: Workspace, table: str, stem: str) -> str:
    return f"{ws.corpus_table(table)}/{stem}.parquet"


def _load(ws: Workspace, table: str, model: type, stem: str | None) -> list:
    path = shard_path(ws, table, stem) if stem is not None else ws.corpus_table(table)
    return read_records(path, model)  # a missing shard or folder reads as no rows


def load_documents(ws: Workspace) -> list[Document]:
    return _load(ws, "documents", Document, None)


def load_document(ws: Workspace, stem: str) -> Document | None:
    docs = _load(ws, "documents", Document, stem)
    return docs[0] if docs else None


def load_pages(ws: Workspace, stem: str | None = None) -> list[Page]:
    return _load(ws, "pages", Page, stem)


def load_layout(ws: Workspace, stem: str | None = None) -> list[LayoutBlock]:
    return _load(ws, "layout", LayoutBlock, stem)


def load_errors(ws: Workspace) -> list[IngestError]:
    return _load(ws, "errors", IngestError, None)


def page_index(ws: Workspace) -> dict[str, Page]:
    """page_id -> Page over the whole corpus."""
    return {p.page_id: p for p in load_pages(ws)}


def write_document(ws: Workspace, doc: Document, pages: list[Page], blocks: list[LayoutBlock]) -> None:
    """Pages and layout first, the document row last: a document shard means its pages are complete."""
    write_records(shard_path(ws, "pages", doc.stem), pages, Page)
    write_records(shard_path(ws, "layout", doc.stem), blocks, LayoutBlock)
    write_records(shard_path(ws, "documents", doc.stem), [doc], Document)


@contextlib.contextmanager
def _errors_lock(ws: Workspace) -> Iterator[None]:
    """Several ingest shards may finish at once (flows run them in parallel); on a local workspace an
    advisory lock keeps their read-modify-write of errors.parquet from losing rows."""
    if not ws.is_local:
        yield
        return
    import fcntl

    corpus = ws.corpus.removeprefix("file://")
    os.makedirs(corpus, exist_ok=True)
    with open(os.path.join(corpus, ".errors.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def replace_errors(ws: Workspace, path: str, errors: list[IngestError]) -> int:
    """A document ingested again: its rows from earlier attempts go (a failure a retry fixed leaves no row) and
    this attempt's errors (pages it could not render, notices) take their place. Returns the row count."""
    with _errors_lock(ws):
        rows = [e for e in load_errors(ws) if e.path != path] + list(errors)
        return write_records(ws.corpus_table("errors"), rows, IngestError)


def append_errors(ws: Workspace, errors: list[IngestError]) -> int:
    """Add errors to `corpus/errors.parquet` (rewritten atomically). The same (path, stage, page, reason)
    reported again replaces the older row, so re-runs do not pile up duplicates. Returns the row count."""
    if not errors:
        return len(load_errors(ws))
    with _errors_lock(ws):
        rows = {(e.path, e.stage, e.page, e.reason): e for e in load_errors(ws)}
        for e in errors:
            rows.pop((e.path, e.stage, e.page, e.reason), None)
            rows[(e.path, e.stage, e.page, e.reason)] = e
        return write_records(ws.corpus_table("errors"), list(rows.values()), IngestError)
