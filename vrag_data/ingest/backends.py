"""Layout backends: what finds a page's structured blocks (tables, charts, figures, headings) beyond its text layer.

A backend is one module: a `LayoutBackend` subclass and one `register_backend(...)` line; `ingest.layout` names it.
It declares the block sources it writes and their rank (`block_sources`: lower = more structured; when two blocks
cover the same region, question generation keeps the better-ranked one), and runs either on each PDF page in the
ingest process (`per_page`: `page_layout(page, words)`) or once per PDF, out of process (`per_document`:
`document_layout(path, sizes, opts)`; such documents are never split across workers). Found by the one discovery
rule (`vrag_data.plugins`): a module of `vrag_data/ingest/` holding a `register_backend(...)` line (the shipped
`pymupdf` and `mineru`; `off` is registered here), or one an installed package announces under the entry-point group
`vrag_data.layout_backends`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vrag_data.ingest.geometry import Rect
from vrag_data.plugins import Registry
from vrag_data.schema.records import LayoutBlock, LayoutClass

ENTRY_POINT_GROUP = "vrag_data.layout_backends"
# block sources every ingest may write whatever the backend: OCR engines, the sample corpus, the text layer
BASE_SOURCES: dict[str, int] = {"paddleocr": 3, "rapidocr": 4, "synthetic": 5, "text_layer": 6}


@dataclass
class RawBlock:
    """A block a per-page backend found, in PDF points of the rotated page (the ingest scales it to the image)."""

    rect: Rect
    cls: LayoutClass
    source: str  # one of the backend's `block_sources`
    text: str = ""
    model_cls: str = ""  # the layout model's own class name (kept for heading levels)
    score: float | None = None


@dataclass
class PageLayout:
    """What a per-page backend found on one page."""

    blocks: list[RawBlock] = field(default_factory=list)
    tables_md: list[str] = field(default_factory=list)


@dataclass
class DocumentPage:
    """What a per-document backend found on one page: blocks in image pixels (doc_id / page_id filled in by the
    ingest), the page's tables as markdown, headings (page, level, text) for the outline."""

    blocks: list[LayoutBlock] = field(default_factory=list)
    tables_md: list[str] = field(default_factory=list)
    headings: list[tuple[int, int, str]] = field(default_factory=list)


class LayoutBackend:
    name: ClassVar[str]
    block_sources: ClassVar[Mapping[str, int]] = {}
    per_page: ClassVar[bool] = False
    per_document: ClassVar[bool] = False
    loads_layout_model: ClassVar[bool] = False  # PyMuPDF's ONNX layout model is imported in each worker
    needs_words: ClassVar[bool] = False  # page_layout reads the text layer's words

    def check(self, opts: Any) -> None:  # opts: the ingest settings (IngestOptions; a settings model imports no registry)
        """Stops with one line before any document is touched when the backend cannot run (a missing tool)."""

    def hash_keys(self, opts: Any) -> dict[str, Any]:
        """Settings that change the backend's output (a workspace ingested under others is ingested again)."""
        return {}

    def page_layout(self, page: Any, words: list[tuple[Rect, str]]) -> PageLayout:
        raise NotImplementedError

    def document_layout(self, path: str, sizes: dict[int, tuple[int, int]], opts: Any) -> dict[int, DocumentPage]:
        raise NotImplementedError


class NoLayout(LayoutBackend):
    """`ingest.layout: off`: the text layer (and OCR) only."""

    name = "off"


def _check(backend: LayoutBackend, others: dict[str, LayoutBackend]) -> None:
    """A block source names one backend's blocks: one another backend (or every ingest) writes is refused."""
    for src in backend.block_sources:
        owner = next((b.name for b in others.values() if src in b.block_sources), None)
        if src in BASE_SOURCES or owner is not None:
            raise ValueError(f"register layout backend: {backend.name}: block source {src!r} is already written by "
                             f"{owner or 'every ingest'}; name the backend's blocks after it")


def _shipped() -> None:
    BACKENDS.register(NoLayout)


BACKENDS: Registry[LayoutBackend] = Registry.of_class("layout backend", ENTRY_POINT_GROUP, LayoutBackend, check=_check,
                                                      shipped=_shipped, call="register_backend", folder="vrag_data.ingest")


def register_backend(backend: LayoutBackend | type[LayoutBackend]) -> LayoutBackend:
    """Register `backend` under its `name`; a name or a block source taken by another backend is refused."""
    return BACKENDS.register(backend)


def known_backends() -> tuple[str, ...]:
    return BACKENDS.names()


def get_backend(name: str) -> LayoutBackend:
    """The registered backend `name`; an unknown name is one line naming the known ones."""
    return BACKENDS.get(name)


def ingest_hash(opts: Any) -> str:
    """The hash of the ingest settings (IngestOptions) that change a workspace, the layout backend's own included."""
    return str(opts.output_hash(get_backend(opts.layout).hash_keys(opts)))


def block_source_ranks() -> dict[str, int]:
    """Every block source an ingest can write -> its rank (lower = more structured)."""
    BACKENDS.load()
    ranks = dict(BASE_SOURCES)
    for b in BACKENDS.items.values():
        ranks.update(b.block_sources)
    return ranks
