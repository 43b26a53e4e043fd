"""Layout blocks and table grids from PyMuPDF's bundled layout model, charts from vector drawings.

`page.get_layout(return_raw=True)` (pymupdf 2.0) stores `page.layout_information`: a list of groups (dicts
with `group_bbox` in PDF points, `class_name`, the member text-line boxes `bboxes` and, for tables, the
predicted `table_cells`) with classes text, title, section-header, picture, table, list-item, page-header, page-footer,
footnote, caption, formula. It gives no scores. It reads text boxes, so pages without a text layer get no
blocks (OCR lines cover those pages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vrag_data.ingest.backends import LayoutBackend, PageLayout, RawBlock, register_backend
from vrag_data.ingest.geometry import Rect, area, center_in, covered
from vrag_data.ingest.tables import tables_in_region
from vrag_data.ingest.textlayer import to_page_rect
from vrag_data.schema.records import LayoutClass

if TYPE_CHECKING:
    from vrag_data.ingest.options import IngestOptions

__all__ = ["PageLayout", "RawBlock", "analyse_layout"]

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


def grid_markdown(cells: list[tuple[int, int, int, int, str]]) -> str:
    """Markdown for a table grid given as (row_start, row_end, col_start, col_end, text), ends exclusive.

    A spanning cell's text is repeated in every slot it covers, so each column header carries its group
    label and each row its row label; rows and columns left empty everywhere are dropped.
    """
    cells = [c for c in cells if c[4].strip() and c[1] > c[0] >= 0 and c[3] > c[2] >= 0]
    if not cells:
        return ""
    n_rows, n_cols = max(c[1] for c in cells), max(c[3] for c in cells)
    grid = [[""] * n_cols for _ in range(n_rows)]
    for r0, r1, c0, c1, text in cells:
        text = " ".join(text.split()).replace("|", "\\|")
        for r in range(r0, r1):
            for c in range(c0, c1):
                grid[r][c] = f"{grid[r][c]} {text}" if grid[r][c] else text
    grid = [row for row in grid if any(row)]
    keep = [c for c in range(n_cols) if any(row[c] for row in grid)]
    if not grid or not keep:
        return ""
    lines = ["| " + " | ".join(row[c] for c in keep) + " |" for row in grid]
    lines.insert(1, "| " + " | ".join("---" for _ in keep) + " |")
    return "\n".join(lines)


def _table_from_group(group: dict[str, Any], words: list[tuple[Rect, str]], m: Any) -> str:
    """The layout model already predicts each table's cell grid (rows/columns and spans of the text lines
    inside it), so the markdown is built from that instead of running `find_tables` again (~0.65 s of CPU
    per table page). A cell's text comes from the text layer's words inside its line boxes: the model's
    own line strings join PDF spans with spaces ("O p en"), the words do not."""
    boxes = group.get("bboxes") or []
    grid = []
    used: set[int] = set()  # a word whose centre lies in two overlapping line boxes goes to the first only
    for cell in group.get("table_cells") or []:
        idx = getattr(cell, "bbox_idx", -1)
        text = ""
        if 0 <= idx < len(boxes):
            rect = to_page_rect(tuple(boxes[idx][:4]), m)
            hits = [k for k, (r, _) in enumerate(words) if k not in used and center_in(r, rect)]
            used.update(hits)
            text = " ".join(words[k][1] for k in hits)
        grid.append((cell.row_start, cell.row_end, cell.col_start, cell.col_end, text or str(getattr(cell, "text", ""))))
    return grid_markdown(grid)


def _add_tables(result: PageLayout, group: dict[str, Any], words: list[tuple[Rect, str]], m: Any, rect: Rect,
                context: str) -> None:
    """The region's tables rebuilt from word geometry (`tables.py`); the model's own grid only when that finds no
    grid (a region of one column). A table of contents or an index turns the region's block into `other`: it is
    navigation, never question material. The markdown blocks keep the "find_tables" source: downstream ranks the
    structured table block by that name."""
    try:
        tables = tables_in_region(words, rect, context)
    except Exception:  # noqa: BLE001 - a malformed region must not lose the page's other blocks
        tables = []
    if any(t.kind == "toc" for t in tables):
        result.blocks[-1].cls, result.blocks[-1].model_cls = "other", "table-of-contents"
    data = [t for t in tables if t.kind == "data"]
    if not tables:
        try:
            md = _table_from_group(group, words, m)
        except Exception:  # noqa: BLE001
            md = ""
        data_md = [(rect, md)] if md else []
    else:
        data_md = [(t.rect, t.markdown()) for t in data]
    for r, md in data_md:
        result.blocks.append(RawBlock(rect=r, cls="table", source="find_tables", text=md, model_cls="table"))
        result.tables_md.append(md)


def analyse_layout(page: Any, words: list[tuple[Rect, str]]) -> PageLayout:
    """Run the layout model once (its table grids included), then vector charts, for one page."""
    m = page.rotation_matrix if page.rotation else None
    groups: list[dict[str, Any]] = []
    if words:  # the model groups text boxes: with no text layer it returns nothing, after ~0.5 s of features
        with np.errstate(divide="ignore", invalid="ignore"):  # the model's features take log(0) on slivers
            page.get_layout(return_raw=True)  # groups with class, box, member lines and table cells
        groups = page.layout_information or []
    result = PageLayout()
    context = " ".join(text_in_rect(words, to_page_rect(tuple(g["group_bbox"][:4]), m)) for g in groups
                       if g.get("class_name") in ("title", "section-header", "page-header"))
    for group in groups:
        name = str(group.get("class_name", ""))
        rect = to_page_rect(tuple(group["group_bbox"][:4]), m)
        result.blocks.append(
            RawBlock(rect=rect, cls=map_model_class(name), source="pymupdf", text=text_in_rect(words, rect), model_cls=name)
        )
        if name == "table":
            _add_tables(result, group, words, m, rect, context)
    drawings = [to_page_rect(tuple(r), m) for r in page.cluster_drawings(x_tolerance=15, y_tolerance=15)]
    if drawings:
        result.blocks.extend(find_charts(result.blocks, drawings, page.rect.width * page.rect.height))
    return result


class PymupdfLayout(LayoutBackend):
    """PyMuPDF's layout model on each page in process (its table grids first, then the model's regions and vector
    charts)."""

    name = "pymupdf"
    block_sources = {"find_tables": 0, "pymupdf": 2}
    per_page = True
    loads_layout_model = True
    needs_words = True

    def hash_keys(self, opts: IngestOptions) -> dict[str, Any]:
        return {"tables": 4}  # table grids from word geometry (ingest/tables.py): older workspaces re-ingest

    def page_layout(self, page: Any, words: list[tuple[Rect, str]]) -> PageLayout:
        return analyse_layout(page, words)


register_backend(PymupdfLayout)
