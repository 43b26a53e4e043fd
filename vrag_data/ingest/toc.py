"""Per-document table of contents and figure/table list (the MM-Doc-R1 planner's view of a document)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from vrag_data.ingest.geometry import h_overlap, v_gap
from vrag_data.schema.records import FigureEntry, LayoutBlock, TocEntry

_CAPTION_PREFIX = re.compile(r"^\s*(fig(ure)?|table|tab\.|chart|exhibit|graph)\s*[\dIVX]", re.I)
_MAX_TITLE = 200
_CAPTION_GAP = 60  # 0-1000 units of page height between a figure/table and its caption


def toc_from_outline(outline: Sequence[Sequence[object]], n_pages: int) -> list[TocEntry]:
    """PyMuPDF's `doc.get_toc()` rows `[level, title, page]`; unresolved (<1) or out-of-range pages dropped."""
    out = []
    for row in outline:
        level, title, page = int(row[0]), str(row[1]).strip(), int(row[2])  # type: ignore[call-overload]
        if title and 1 <= page <= n_pages:
            out.append(TocEntry(level=max(1, level), title=title[:_MAX_TITLE], page=page))
    return out


def toc_from_headings(headings: Sequence[tuple[int, int, str]], n_pages: int) -> list[TocEntry]:
    """Headings `(page, level, text)` in reading order -> TOC. Text repeated on many pages (a running title)
    and fragments without letters are not section headers."""
    cleaned = [(p, lvl, " ".join(t.split())[:_MAX_TITLE]) for p, lvl, t in headings]
    cleaned = [(p, lvl, t) for p, lvl, t in cleaned if len(t) >= 2 and any(c.isalpha() for c in t)]
    pages_per_text = Counter()
    for text, pages in _group_pages(cleaned).items():
        pages_per_text[text] = len(pages)
    limit = max(2, n_pages // 3)
    out: list[TocEntry] = []
    for p, lvl, t in cleaned:
        if pages_per_text[t.lower()] > limit and n_pages > 3:
            continue
        if out and out[-1].title == t:
            continue
        out.append(TocEntry(level=lvl, title=t, page=p))
    return out


def _group_pages(items: Sequence[tuple[int, int, str]]) -> dict[str, set[int]]:
    groups: dict[str, set[int]] = {}
    for p, _, t in items:
        groups.setdefault(t.lower(), set()).add(p)
    return groups


def _kind(cls: str) -> str:
    return {"table": "table", "chart": "chart"}.get(cls, "figure")


def figures_from_blocks(blocks: Sequence[LayoutBlock]) -> list[FigureEntry]:
    """Pair each figure/chart/table block with the nearest caption block above or below it on the same page
    (horizontal overlap, small vertical gap; each caption used once). Tables are listed even without a
    caption; figures only with one (logos and decorations have none). Captions that name a figure or table
    ("Figure 3", "Table 2") but sit alone are listed too."""
    by_page: dict[int, list[LayoutBlock]] = {}
    for b in blocks:
        if b.source != "find_tables":  # the layout model's table block stands for the table
            by_page.setdefault(b.page, []).append(b)
    out: list[FigureEntry] = []
    for page in sorted(by_page):
        items = by_page[page]
        targets = [b for b in items if b.cls in ("figure", "chart", "table")]
        captions = [b for b in items if b.cls == "caption" and b.text.strip()]
        used: set[str] = set()
        pairs = sorted(
            (v_gap(t.bbox.norm, c.bbox.norm), ti, ci)
            for ti, t in enumerate(targets)
            for ci, c in enumerate(captions)
            if h_overlap(t.bbox.norm, c.bbox.norm) >= 0.3 and v_gap(t.bbox.norm, c.bbox.norm) <= _CAPTION_GAP
        )
        chosen: dict[int, LayoutBlock] = {}
        for _, ti, ci in pairs:
            if ti in chosen or captions[ci].block_id in used:
                continue
            chosen[ti] = captions[ci]
            used.add(captions[ci].block_id)
        for ti, t in enumerate(targets):
            cap = chosen.get(ti)
            if cap is None and t.cls != "table":
                continue
            caption = " ".join(cap.text.split()) if cap else ""
            out.append(FigureEntry(kind=_kind(t.cls), caption=caption, page=page, bbox=t.bbox))  # type: ignore[arg-type]
        for c in captions:
            if c.block_id not in used and _CAPTION_PREFIX.match(c.text):
                word = c.text.strip().lower()
                kind = "table" if word.startswith("tab") else "chart" if word.startswith(("chart", "graph")) else "figure"
                out.append(FigureEntry(kind=kind, caption=" ".join(c.text.split()), page=page, bbox=c.bbox))  # type: ignore[arg-type]
    return out
