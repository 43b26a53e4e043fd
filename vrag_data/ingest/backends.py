"""Layout backends: what finds a page's structured blocks (tables, charts, figures, headings) beyond its text layer.

A backend is one module: a `LayoutBackend` subclass and one `register_backend(...)` line; `ingest.layout` names it.
It declares the block sources it writes and their rank (`block_sources`: lower = more structured; when two blocks
cover the same region, question generation keeps the better-ranked one), and runs either on each PDF page in the
ingest process (`per_page`: `page_layout(page, words)`) or once per PDF, out of process (`per_document`:
`document_layout(path, sizes, opts)`; such documents are never split across workers). The shipped backends:
`pymupdf` (`vrag_data.ingest.layout`), `mineru` (`vrag_data.ingest.mineru`) and `off`; another package adds one
through the entry-point group `vrag_data.layout_backends`.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

from vrag_data.ingest.geometry import Rect
from vrag_data.schema.records import LayoutBlock, LayoutClass

ENTRY_POINT_GROUP = "vrag_data.layout_backends"
SHIPPED_MODULES = ("vrag_data.ingest.layout", "vrag_data.ingest.mineru")
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


_BACKENDS: dict[str, LayoutBackend] = {}
_loaded = False


def register_backend(backend: LayoutBackend | type[LayoutBackend]) -> LayoutBackend:
    """Register `backend` under its `name`; a name or a block source taken by another backend is refused."""
    obj = backend() if isinstance(backend, type) else backend
    if not isinstance(obj, LayoutBackend) or not getattr(obj, "name", ""):
        raise ValueError(f"register_backend: {backend!r} is not a named LayoutBackend; subclass "
                         "vrag_data.ingest.backends.LayoutBackend and set `name`")
    held = _BACKENDS.get(obj.name)
    if held is not None and type(held) is not type(obj):
        raise ValueError(f"register_backend: the name {obj.name!r} is taken by {type(held).__name__}; pick another name")
    for src in obj.block_sources:
        owner = next((b.name for b in _BACKENDS.values() if src in b.block_sources and b.name != obj.name), None)
        if src in BASE_SOURCES or owner is not None:
            raise ValueError(f"register_backend: {obj.name}: block source {src!r} is already written by "
                             f"{owner or 'every ingest'}; name the backend's blocks after it")
    _BACKENDS[obj.name] = obj
    return obj


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    register_backend(NoLayout)
    for mod in SHIPPED_MODULES:
        importlib.import_module(mod)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - named in one line
            raise ValueError(f"layout backend plugin {ep.name!r} ({ep.value}) failed to load: {exc}; "
                             "fix or uninstall the package that declares it") from None
        if isinstance(obj, LayoutBackend) or isinstance(obj, type) and issubclass(obj, LayoutBackend):
            register_backend(obj)
        elif not isinstance(obj, types.ModuleType):  # a module registers its backends when imported
            raise ValueError(f"layout backend plugin {ep.name!r} ({ep.value}) is neither a LayoutBackend nor a module; "
                             "point the entry point at a LayoutBackend subclass")


def known_backends() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_BACKENDS))


def get_backend(name: str) -> LayoutBackend:
    """The registered backend `name`; an unknown name is one line naming the known ones."""
    _load()
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown layout backend {name!r}; known: {sorted(_BACKENDS)}") from None


def ingest_hash(opts: Any) -> str:
    """The hash of the ingest settings (IngestOptions) that change a workspace, the layout backend's own included."""
    return str(opts.output_hash(get_backend(opts.layout).hash_keys(opts)))


def block_source_ranks() -> dict[str, int]:
    """Every block source an ingest can write -> its rank (lower = more structured)."""
    _load()
    ranks = dict(BASE_SOURCES)
    for b in _BACKENDS.values():
        ranks.update(b.block_sources)
    return ranks
