"""Match RawTasks against the ingested corpus: document names -> Documents, pages -> page ids, boxes -> Box."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from vrag_data.ids import page_id, task_id
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Document, EvidenceBox, HopType, Page, Task
from vrag_data.store import Workspace, read_records
from vrag_data.tasks.formats import RawBox, RawTask, RowError

DOC_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp")


def _strip_suffix(name: str) -> str:
    """File name without folder and document extension ("a/b.v2.pdf" -> "b.v2"); stems may contain dots."""
    base = PurePosixPath(name.replace("\\", "/")).name
    for suffix in DOC_SUFFIXES:
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


@dataclass
class _PageInfo:
    width: int
    height: int
    dpi: int


class CorpusIndex:
    """The workspace's documents by file name and by stem, with their pages loaded on first use."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.by_name: dict[str, Document] = {}
        docs = read_records(ws.corpus_table("documents"), Document)
        for d in sorted(docs, key=lambda d: d.stem):
            self.by_name.setdefault(d.stem, d)
            self.by_name.setdefault(PurePosixPath(d.source_path.replace("\\", "/")).name, d)
        self.n_docs = len({d.doc_id for d in docs})
        self._pages: dict[str, dict[int, _PageInfo]] = {}

    def document(self, name: str) -> Document | None:
        return self.by_name.get(name) or self.by_name.get(_strip_suffix(name))

    def pages(self, doc: Document) -> dict[int, _PageInfo]:
        if doc.stem not in self._pages:
            path = f"{self.ws.corpus_table('pages')}/{doc.stem}.parquet"
            rows = read_records(path, Page)
            self._pages[doc.stem] = {p.page: _PageInfo(p.width, p.height, p.dpi)
                                     for p in rows if p.doc_id == doc.doc_id}
        return self._pages[doc.stem]


def hop_type(n_docs: int, n_pages: int) -> HopType:
    if n_pages == 0:
        return "unanswerable"
    if n_docs > 1:
        return "cross_doc"
    return "multi_page" if n_pages > 1 else "single"


def _page(index: CorpusIndex, name: str, page: int) -> tuple[Document, _PageInfo]:
    doc = index.document(name)
    if doc is None:
        raise RowError(f"document {name!r} is not in the workspace; ingest it first")
    pages = index.pages(doc)
    if page not in pages:
        have = f"{len(pages)} pages ingested" if pages else "no pages ingested"
        raise RowError(f"page {page} of {name!r} is out of range ({have}; pages are 1-based)")
    return doc, pages[page]


def _box(index: CorpusIndex, raw: RawBox) -> EvidenceBox:
    doc, info = _page(index, raw.doc, raw.page)
    if len(raw.bbox) != 4:
        raise RowError(f"evidence box on page {raw.page} needs 4 numbers, got {len(raw.bbox)}")
    try:
        x1, y1, x2, y2 = (float(v) for v in raw.bbox)
    except (TypeError, ValueError):
        raise RowError(f"evidence box {str(list(raw.bbox))[:60]} on page {raw.page} must be 4 numbers") from None
    if raw.dpi is None:  # 0-1 normalised
        sx, sy = info.width, info.height
    else:  # raw pixels at raw.dpi -> pixels of our page image, rendered at info.dpi
        sx = sy = info.dpi / raw.dpi
    box = (x1 * sx, y1 * sy, x2 * sx, y2 * sy)
    if not (box[0] < box[2] and box[1] < box[3]):
        raise RowError(f"evidence box {list(raw.bbox)} on page {raw.page} is empty or inverted")
    box = (max(0.0, box[0]), max(0.0, box[1]), min(float(info.width), box[2]), min(float(info.height), box[3]))
    return EvidenceBox(page_id=page_id(doc.stem, raw.page), box=Box.from_raw(box, info.width, info.height),
                       source=raw.source, text=raw.text)  # type: ignore[arg-type]


def to_task(raw: RawTask, index: CorpusIndex, split: str, source: str | None = None) -> Task:
    """The Task of one parsed row; `source` (the workspace's name for the imported file) is part of its id."""
    docs: dict[str, Document] = {}  # doc_id -> Document, in order of first mention
    for name in raw.docs:
        doc = index.document(name)
        if doc is None:
            raise RowError(f"document {name!r} is not in the workspace; ingest it first")
        docs.setdefault(doc.doc_id, doc)
    page_ids = []
    for name, page in raw.pages:
        doc, _ = _page(index, name, page)
        docs.setdefault(doc.doc_id, doc)
        pid = page_id(doc.stem, page)
        if pid not in page_ids:
            page_ids.append(pid)
    boxes = [_box(index, b) for b in raw.boxes]
    doc_ids = list(docs)
    return Task(
        task_id=task_id(doc_ids, raw.question, source), question=raw.question.strip(), answer=raw.answer,
        answer_format=raw.answer_format,  # type: ignore[arg-type]  # checked against ANSWER_FORMATS
        doc_ids=doc_ids, doc_stems=[d.stem for d in docs.values()],
        evidence_pages=page_ids, evidence_boxes=boxes, sources=raw.sources,  # type: ignore[arg-type]
        hop_type=hop_type(len(docs), len(page_ids)), reasoning_type=raw.reasoning_type,
        benchmark=raw.benchmark, split=split, source_id=raw.source_id, extra=raw.extra,
    )
