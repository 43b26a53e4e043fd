"""The PDF text layer of one page: plain text, text blocks and words, in page coordinates (points)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Rect = tuple[float, float, float, float]


@dataclass
class TextLayer:
    text: str = ""
    blocks: list[tuple[Rect, str]] = field(default_factory=list)
    words: list[tuple[Rect, str]] = field(default_factory=list)


def usable_chars(text: str) -> int:
    return sum(1 for c in text if not c.isspace())


def _rotated(page: Any) -> Any:
    # Text coordinates come in the unrotated page space; the pixmap is drawn rotated.
    return page.rotation_matrix if page.rotation else None


def to_page_rect(rect: Rect, matrix: Any) -> Rect:
    if matrix is None:
        return rect
    import pymupdf

    r = pymupdf.Rect(rect) * matrix
    return (r.x0, r.y0, r.x1, r.y1)


def extract_text_layer(page: Any, want_words: bool) -> TextLayer:
    """One text page serves both extractions (building it is the expensive part)."""
    tp = page.get_textpage()
    m = _rotated(page)
    blocks = []
    for b in page.get_text("blocks", textpage=tp):
        if b[6] != 0:  # image block
            continue
        txt = b[4].strip()
        if txt:
            blocks.append((to_page_rect(tuple(b[:4]), m), txt))
    words = [(to_page_rect(tuple(w[:4]), m), w[4]) for w in page.get_text("words", textpage=tp)] if want_words else []
    return TextLayer(text="\n\n".join(t for _, t in blocks), blocks=blocks, words=words)
