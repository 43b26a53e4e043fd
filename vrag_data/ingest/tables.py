"""Table structure from the words inside a table region: rows, columns, merged header rows, stacked tables, and
tables of contents / indexes told apart from data.

The layout model finds where a table is; its predicted cell grid, read back from its text lines, merges adjacent rows
and columns and keeps multi-row headers as data (a 3-year table over a 2-year one becomes one grid, every value of the
second shifted a column). Here the grid is rebuilt from word geometry, which PDFs keep exact:
- a line = words whose vertical extents overlap; a segment = words of a line with no column-wide gap between them
  ("$" and a trailing ")" or "%" stick to their number);
- columns = x ranges covered by the value segments of enough data lines (a single long label does not bridge two);
- header = the leading lines before the first data line that have no row label (or the first line, when it holds no
  values); each header line names the columns under it (a segment over some columns names only those), and the
  names of all header lines are joined top to bottom (a word hyphenated at a line end joined again);
- a header-like line (no label, no values, years or several segments) after data lines starts a new table;
- a label-only line followed by a line whose label starts in lower case is one wrapped label.
A table whose rows end in ascending page numbers (or with dot leaders, or titled contents / index) is a table of
contents and never question material.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median

from vrag_data.ingest.table_cells import (  # noqa: F401 - is_value is part of this module's interface
    STICK_LEFT, STICK_RIGHT, YEAR, Line, Rect, Seg, Word, dist, is_value, overlap,
)
from vrag_data.ingest.table_headers import header_names

_PAGE_NO = re.compile(r"^(\d{1,4}|[ivxlc]{1,6})$", re.I)
_TOC_WORDS = re.compile(r"\b(table of contents|contents|index)\b", re.I)
GAP_EM = 0.8  # a horizontal gap wider than this many word heights separates two cells
MIN_COVER = 0.25  # share of data lines that must cover an x position for it to belong to a column


@dataclass
class Table:
    header: list[str]  # [row-label column name, column names...]
    rows: list[list[str]]  # [row label, values...]
    rect: Rect
    kind: str = "data"  # data | toc

    def markdown(self) -> str:
        esc = lambda s: " ".join(s.split()).replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(esc(h) for h in self.header) + " |",
                 "| " + " | ".join("---" for _ in self.header) + " |"]
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)


def _group_lines(words: list[Word]) -> list[list[Word]]:
    ws = sorted(words, key=lambda w: ((w[0][1] + w[0][3]) / 2, w[0][0]))
    lines: list[list[Word]] = []
    band = (0.0, 0.0)
    for r, t in ws:
        h = max(r[3] - r[1], 0.1)
        if lines:
            ov = min(band[1], r[3]) - max(band[0], r[1])
            if ov >= 0.5 * min(h, band[1] - band[0]):  # the band stays the line's first word's: a cell centred
                lines[-1].append((r, t))  # between two header rows must not pull them into one line
                continue
        lines.append([(r, t)])
        band = (r[1], r[3])
    return lines


def _segments(line: list[Word], gap: float) -> list[Seg]:
    segs: list[Seg] = []
    for r, t in sorted(line, key=lambda w: w[0][0]):
        joins = r[0] - segs[-1].x1 <= gap and not STICK_RIGHT.match(t) if segs else False
        if segs and (joins or STICK_RIGHT.match(segs[-1].text) or STICK_LEFT.match(t)):
            segs[-1] = Seg(segs[-1].x0, max(segs[-1].x1, r[2]), f"{segs[-1].text} {t}")
        else:
            segs.append(Seg(r[0], r[2], t))
    return segs


def _bands(lines: list[Line], width: Rect) -> list[tuple[float, float]]:
    """Column x ranges: positions covered by the cells of at least MIN_COVER of the data lines (all lines with
    cells when no line holds a value: a table of text)."""
    data = [ln for ln in lines if ln.has_value] or [ln for ln in lines if ln.cells]
    if not data:
        return []
    x0, x1 = int(width[0]) - 1, int(width[2]) + 2
    cover = [0] * (x1 - x0 + 1)
    for ln in data:
        for s in ln.cells:
            for x in range(max(x0, int(s.x0)), min(x1, int(s.x1) + 1)):
                cover[x - x0] += 1
    need = max(1, MIN_COVER * len(data))
    bands: list[tuple[float, float]] = []
    start = None
    for i, c in enumerate(cover + [0]):
        if c >= need and start is None:
            start = i
        elif c < need and start is not None:
            bands.append((float(start + x0), float(i - 1 + x0)))
            start = None
    return bands


def _place(segs: list[Seg], bands: list[tuple[float, float]]) -> dict[int, str]:
    """Body cells: each segment to the band it overlaps most (the nearest when none)."""
    out: dict[int, str] = {}
    for s in segs:
        k = min(range(len(bands)), key=lambda i: (dist(s, bands[i]), -overlap(s, bands[i])))
        out[k] = f"{out[k]} {s.text}" if k in out else s.text
    return out


def _split_label(segs: list[Seg], first_band: float | None, left: float = 0.0) -> tuple[str, list[Seg]]:
    """The row label: the first segment when it is text that starts nearer the table's left edge than the first
    value column (a header word right-aligned over that column is not a label)."""
    if segs and not is_value(segs[0].text) and (first_band is None or segs[0].x0 < (left + first_band) / 2):
        return segs[0].text, segs[1:]
    return "", segs


def _header_like(ln: Line) -> bool:
    return not ln.label and bool(ln.cells) and not ln.has_value and (
        len(ln.cells) >= 2 or any(YEAR.search(s.text) for s in ln.cells))


def _header_rows(lines: list[Line], n_cols: int) -> int:
    """How many leading lines are header. With numbers in the table: the lines before the first line holding one,
    less label-only lines just above it (section rows: "Revenues"). A table of text: the lines before the first
    that has a row label and at least half of its cells."""
    if any(ln.has_value for ln in lines):
        n = next(i for i, ln in enumerate(lines) if ln.has_value)
        while n > 0 and lines[n - 1].label and not lines[n - 1].cells:
            n -= 1
        return n
    return next((i for i, ln in enumerate(lines) if ln.label and len(ln.cells) >= max(1, n_cols / 2)), 0)


def _build(lines: list[Line], rect: Rect) -> Table | None:
    bands = _bands(lines, rect)
    if not bands:
        return None
    # re-split labels now that the first column's left edge is known: a label must start left of it
    left = min(ln.segs[0].x0 for ln in lines)
    for ln in lines:
        ln.label, ln.cells = _split_label(ln.segs, bands[0][0], left)
    n_head = _header_rows(lines, len(bands))
    head, body = lines[:n_head], lines[n_head:]
    label_name, names = header_names(head, bands)
    rows: list[list[str]] = []
    pending = ""  # a wrapped label's first line
    for ln in body:
        placed = _place(ln.cells, bands)
        label = ln.label
        if pending and (not label or label[:1].islower()):
            label = f"{pending} {label}".strip()
        elif pending:
            rows.append([pending] + [""] * len(bands))
        pending = ""
        if label and not placed:
            pending = label
            continue
        rows.append([label] + [placed.get(i, "") for i in range(len(bands))])
    if pending:
        rows.append([pending] + [""] * len(bands))
    keep = [i for i in range(len(bands)) if any(r[i + 1] for r in rows)]
    if not rows or not keep:
        return None
    names = _distinct([names[i] for i in keep], [[r[i + 1] for r in rows] for i in keep])
    y0 = min(ln.y0 for ln in lines)
    y1 = max(ln.y1 for ln in lines)
    return Table([label_name] + names, [[r[0]] + [r[i + 1] for i in keep] for r in rows],
                 (rect[0], y0, rect[2], y1))


def _distinct(names: list[str], columns: list[list[str]]) -> list[str]:
    """Two columns under one name (an amount and its percentage under "Change 2015 vs. 2014"): the one holding
    percentages is named so."""
    out = list(names)
    for i, n in enumerate(names):
        if n and names.count(n) > 1:
            vals = [v for v in columns[i] if v]
            if vals and sum("%" in v for v in vals) >= 0.6 * len(vals):
                out[i] = f"{n} (%)"
    return out


def _stacked(lines: list[Line]) -> list[list[Line]]:
    """Split where a header-like line follows data lines and data lines follow it (two tables one above the other)."""
    parts: list[list[Line]] = [[]]
    seen_data = False
    for i, ln in enumerate(lines):
        if seen_data and _header_like(ln) and any(x.has_value for x in lines[i + 1:i + 4]):
            carried: list[Line] = []  # a title line just above ("December 31,") belongs to the new header
            while parts[-1] and not parts[-1][-1].label and not parts[-1][-1].has_value:
                carried.insert(0, parts[-1].pop())
            parts.append(carried)
            seen_data = False
        parts[-1].append(ln)
        seen_data = seen_data or ln.has_value
    return [p for p in parts if p]


def is_toc(table: Table, context: str = "") -> bool:
    """Contents or index: rows end in page numbers that mostly ascend, or have dot leaders, or the table (or the
    text just above it) says so."""
    texts = [c for r in table.rows for c in r if c]
    if any(re.search(r"\.{4,}|(\. ){3,}", t) for t in texts) and len(table.rows) >= 3:
        return True
    if any(h.strip().lower() in ("page", "pages", "page no.", "page number") for h in table.header):
        return True
    last = [next((c for c in reversed(r[1:]) if c), "") for r in table.rows]
    nums = [int(x) for x in last if re.fullmatch(r"\d{1,4}", x)]
    paged = sum(bool(_PAGE_NO.fullmatch(x)) for x in last)
    if len(table.rows) < 4 or paged < 0.6 * len(table.rows) or len(nums) < 3:
        return False
    if sum(b >= a for a, b in zip(nums, nums[1:])) < 0.8 * (len(nums) - 1):
        return False  # page numbers ascend
    # no other numbers in the rows, or the page says what it is (10-K pages all link "Table of Contents": not enough alone)
    return all(not is_value(c) for r in table.rows for c in r[1:-1] if c) or bool(_TOC_WORDS.search(context))


def tables_in_region(words: list[Word], rect: Rect, context: str = "") -> list[Table]:
    """The tables inside one table region (usually one; two stacked tables give two), each marked data or toc.
    `words` are the page's words in page points; `context` is text near the region (a heading)."""
    inside = [(r, t) for r, t in words
              if rect[0] - 2 <= (r[0] + r[2]) / 2 <= rect[2] + 2 and rect[1] - 2 <= (r[1] + r[3]) / 2 <= rect[3] + 2]
    if not inside:
        return []
    em = median(max(r[3] - r[1], 1.0) for r, _ in inside)
    lines: list[Line] = []
    for grp in _group_lines(inside):
        segs = _segments(grp, GAP_EM * em)
        label, cells = _split_label(segs, None)
        lines.append(Line(min(r[1] for r, _ in grp), max(r[3] for r, _ in grp), segs, label, cells))
    bands = _bands(lines, rect)
    if bands:  # a label starts left of the first column: header lines of years or titles have none
        left = min(ln.segs[0].x0 for ln in lines)
        for ln in lines:
            ln.label, ln.cells = _split_label(ln.segs, bands[0][0], left)
    out = []
    for part in _stacked(lines):
        t = _build(part, rect)
        if t is not None:
            t.kind = "toc" if is_toc(t, context) else "data"
            out.append(t)
    return out
