"""Layout blocks from PyMuPDF's bundled layout model, tables from `find_tables`, charts from vector drawings.

`page.get_layout()` (pymupdf 2.0) stores `page.layout_information`: a list of `[x0, y0, x1, y1, class]` in
PDF points with classes text, title, section-header, picture, table, list-item, page-header, page-footer,
footnote, caption, formula. It gives no scores. It reads text boxes, so pages without a text layer get no
blocks (OCR lines cover those pages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vrag_data.ingest.geometry import Rect, area, center_in, covered
from vrag_data.ingest.textlayer import to_page_rect
from vrag_data.schema.records import LayoutClass

MODEL_CLASS_MAP: dict[str, LayoutClass] = {
    "text": "text",
    "title": "title",
    "section-header": "title",
    "picture": "figure",
    "table": "table",
    "list-item": "list",
    "page-header": "header",
    "page-footer": "footer",
    "footnote": "text",
    "caption": "caption",
    "formula": "formula",
}
HEADING_LEVEL = {"title": 1, "section-header": 2}  # for a TOC built from headings


def map_model_class(name: str) -> LayoutClass:
    return MODEL_CLASS_MAP.get(name, "other")


@dataclass
class RawBlock:
    rect: Rect  # PDF points, rotated page space
    cls: LayoutClass
    source: str  # BlockSource
    text: str = ""
    model_cls: str = ""  # the layout model's own class name (kept for heading levels)
    score: float | None = None


@dataclass
class PageLayout:
    blocks: list[RawBlock] = field(default_factory=list)
    tables_md: list[str] = field(default_factory=list)


def text_in_rect(words: list[tuple[Rect, str]], rect: Rect) -> str:
    """Words whose centre lies in `rect`, in the text layer's reading order."""
    return " ".join(w for r, w in words if center_in(r, rect))


def find_charts(blocks: list[RawBlock], drawings: list[Rect], page_area: float) -> list[RawBlock]:
    """Mark vector-graphics regions as charts.

    The layout model works on text boxes, so a chart drawn with vector paths is often missed or called a
    picture. A large cluster of drawings is a chart unless a table holds it (ruled tables are drawings too);
    a picture block mostly covered by such a cluster becomes a chart. Returns the new chart blocks and
    re-labels pictures in place.
    """
    big = [
        d
        for d in drawings
        if (d[2] - d[0]) >= 40 and (d[3] - d[1]) >= 30 and 0.015 * page_area <= area(d) <= 0.9 * page_area
    ]
    new: list[RawBlock] = []
    for d in big:
        if any(b.cls == "table" and covered(d, b.rect) > 0.3 for b in blocks):
            continue
        pictures = [b for b in blocks if b.cls in ("figure", "chart") and covered(b.rect, d) > 0.5]
        for b in pictures:
            b.cls = "chart"
        if not pictures and not any(b.cls in ("figure", "chart") and covered(d, b.rect) > 0.5 for b in blocks + new):
            new.append(RawBlock(rect=d, cls="chart", source="pymupdf", model_cls="vector-graphics"))
    return new


def _table_markdown(page: Any, m: Any) -> list[tuple[Rect, str]]:
    # find_tables() calls page.get_layout() again by default; the model already ran for this page, so the
    # instance method is shadowed with a no-op and find_tables reuses page.layout_information.
    page.get_layout = lambda **_: None
    try:
        tabs = page.find_tables()
    finally:
        del page.get_layout
    out = []
    for t in tabs.tables:
        try:
            md = t.to_markdown().strip()
        except Exception:  # noqa: BLE001 - a malformed cell grid should not lose the page
            md = ""
        out.append((to_page_rect(tuple(t.bbox), m), md))
    return out


def analyse_layout(page: Any, words: list[tuple[Rect, str]]) -> PageLayout:
    """Run the layout model once, then tables and vector charts for one page."""
    m = page.rotation_matrix if page.rotation else None
    raw = []
    if words:  # the model groups text boxes: with no text layer it returns nothing, after ~0.5 s of features
        with np.errstate(divide="ignore", invalid="ignore"):  # the model's features take log(0) on slivers
            page.get_layout()
        raw = page.layout_information or []
    result = PageLayout()
    for x0, y0, x1, y1, name in raw:
        rect = to_page_rect((x0, y0, x1, y1), m)
        result.blocks.append(
            RawBlock(rect=rect, cls=map_model_class(name), source="pymupdf", text=text_in_rect(words, rect), model_cls=name)
        )
    if any(b.model_cls == "table" for b in result.blocks):
        for rect, md in _table_markdown(page, m):
            result.blocks.append(RawBlock(rect=rect, cls="table", source="find_tables", text=md, model_cls="table"))
            if md:
                result.tables_md.append(md)
    drawings = [to_page_rect(tuple(r), m) for r in page.cluster_drawings(x_tolerance=15, y_tolerance=15)]
    if drawings:
        result.blocks.extend(find_charts(result.blocks, drawings, page.rect.width * page.rect.height))
    return result
