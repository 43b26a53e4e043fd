"""A tiny page-layout helper that draws text and tables with PyMuPDF and remembers where every fact landed.

Boxes are computed from the same font metrics MuPDF uses for text extraction (Helvetica ascender/descender),
so a gold box drawn here is where a text extractor (and a reader) finds the words.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pymupdf

FONT = "helv"
BOLD = "hebo"
ASC, DESC = 1.075, -0.299  # Helvetica metrics as MuPDF reports them (per unit of font size)
PAD = 1.5  # points added around text boxes so glyph edges are never cut off
Rect = tuple[float, float, float, float]


@dataclass(frozen=True)
class Region:
    """Where a fact is visible: page (1-based), rectangle in PDF points, evidence source and the visible text."""

    page: int
    rect: Rect
    source: str  # text | table | chart | figure
    text: str


@functools.cache
def _font(name: str) -> pymupdf.Font:
    return pymupdf.Font(name)


def text_width(text: str, size: float, bold: bool = False) -> float:
    return pymupdf.get_text_length(text, fontname=BOLD if bold else FONT, fontsize=size)


def text_rect(x: float, baseline: float, text: str, size: float, bold: bool = False) -> Rect:
    return (x - PAD, baseline - ASC * size - PAD, x + text_width(text, size, bold) + PAD, baseline - DESC * size + PAD)


def union(rects: list[Rect]) -> Rect:
    return (min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects), max(r[3] for r in rects))


class Canvas:
    """Draws top-down on one page with a cursor; returns Regions for the facts it placed."""

    def __init__(self, page: pymupdf.Page, page_no: int, margin: float) -> None:
        self.page = page
        self.page_no = page_no
        self.margin = margin
        self.width = page.rect.width
        self.height = page.rect.height
        self.y = margin
        self._writers: dict[tuple[float, float, float], pymupdf.TextWriter] = {}

    @property
    def left(self) -> float:
        return self.margin

    @property
    def right(self) -> float:
        return self.width - self.margin

    def text(self, x: float, baseline: float, text: str, size: float, bold: bool = False,
             color: tuple[float, float, float] = (0, 0, 0)) -> Rect:
        # Text is buffered per colour and written once per page (`flush`): one content stream per colour
        # instead of one per word keeps generation fast.
        writer = self._writers.get(color)
        if writer is None:
            writer = self._writers[color] = pymupdf.TextWriter(self.page.rect, color=color)
        writer.append((x, baseline), text, font=_font(BOLD if bold else FONT), fontsize=size)
        return text_rect(x, baseline, text, size, bold)

    def flush(self) -> None:
        for color, writer in self._writers.items():
            writer.write_text(self.page, color=color)
        self._writers.clear()

    def heading(self, text: str, size: float, gap: float = 10) -> Rect:
        baseline = self.y + ASC * size
        r = self.text(self.left, baseline, text, size, bold=True)
        self.y = baseline - DESC * size + gap
        return r

    def paragraph(self, sentences: list[str], size: float, bullet: bool = False, gap: float = 8) -> list[Rect]:
        """Wrap sentences into lines within the margins; return one box per sentence (union of its words).

        With `bullet`, each sentence starts a new bulleted line."""
        line_h = size * 1.45
        indent = size * 1.2 if bullet else 0.0
        x0 = self.left + indent
        x, baseline = x0, self.y + ASC * size
        space = text_width(" ", size)
        boxes: list[Rect] = []
        for i, sentence in enumerate(sentences):
            if bullet and i > 0:
                x, baseline = x0, baseline + line_h
            if bullet:
                self.text(self.left, baseline, "\u2022", size)
            rects: list[Rect] = []
            for word in sentence.split():
                w = text_width(word, size)
                if x > x0 and x + w > self.right:
                    x, baseline = x0, baseline + line_h
                rects.append(self.text(x, baseline, word, size))
                x += w + space
            boxes.append(union(rects))
        self.y = baseline - DESC * size + gap
        return boxes

    def caption(self, text: str, size: float = 9, gap: float = 10) -> Rect:
        baseline = self.y + ASC * size
        r = self.text(self.left, baseline, text, size, color=(0.25, 0.25, 0.25))
        self.y = baseline - DESC * size + gap
        return r

    def table(self, header: list[str], rows: list[list[str]], size: float, col0_w: float | None = None,
              gap: float = 8) -> list[list[Rect]]:
        """A ruled table; returns the cell rectangles (header row first). Numbers are right-aligned."""
        n_cols = len(header)
        total = self.right - self.left
        first = col0_w if col0_w is not None else total * 0.34
        other = (total - first) / max(1, n_cols - 1)
        widths = [first] + [other] * (n_cols - 1)
        row_h = size * 2.0
        cells: list[list[Rect]] = []
        shape = self.page.new_shape()
        y = self.y
        for r_i, row in enumerate([header, *rows]):
            x = self.left
            row_cells: list[Rect] = []
            if r_i == 0:
                shape.draw_rect(pymupdf.Rect(self.left, y, self.right, y + row_h))
                shape.finish(color=None, fill=(0.88, 0.91, 0.96))
            for c_i, value in enumerate(row):
                cell = (x, y, x + widths[c_i], y + row_h)
                baseline = y + row_h / 2 + (ASC + DESC) * size / 2
                tw = text_width(value, size, bold=r_i == 0)
                tx = x + 4 if c_i == 0 else x + widths[c_i] - 4 - tw
                self.text(tx, baseline, value, size, bold=r_i == 0)
                row_cells.append(cell)
                x += widths[c_i]
            cells.append(row_cells)
            y += row_h
        for i in range(len(cells) + 1):  # horizontal rules
            yy = self.y + i * row_h
            shape.draw_line((self.left, yy), (self.right, yy))
        x = self.left
        for w in [0.0, *widths]:  # vertical rules
            x += w
            shape.draw_line((x, self.y), (x, y))
        shape.finish(color=(0.3, 0.3, 0.3), width=0.6)
        shape.commit(overlay=False)  # rules and header shading go under the text
        self.y = y + gap
        return cells

    def reserve(self, height: float) -> Rect:
        r = (self.left, self.y, self.right, self.y + height)
        self.y += height
        return r

    def remaining(self) -> float:
        return self.height - self.margin - self.y
