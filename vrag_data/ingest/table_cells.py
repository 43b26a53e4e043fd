"""The pieces a table is rebuilt from (ingest/tables.py): a word's rectangle, a cell segment, a line of them, what
reads as a value, and the distances between a segment and a column's x range."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Rect = tuple[float, float, float, float]
Word = tuple[Rect, str]

NUMBER = re.compile(r"[-+\u2212(]?\s*[$\u20ac\u00a3]?\s*\(?\d[\d,.]*\)?\s*(%|pp|bps|x)?\)?%?", re.I)
YEAR = re.compile(r"(FY\s?)?(19|20)\d\d", re.I)
UNIT = re.compile(r"^\(?\s*((in\s+|\$\s*)?(thousands|millions|billions)\b|dollars in|amounts in|unaudited|except\b)", re.I)
STICK_RIGHT = re.compile(r"^[$\u20ac\u00a3]$")  # a currency sign stands left of its number
STICK_LEFT = re.compile(r"^[)%]+$|^\)%$")  # a closing bracket or percent sign printed apart from its number
NOTE_MARK = re.compile(r"^(\(\w{1,2}\)|\*{1,3})$")  # "(1)", "(a)", "*": a footnote mark printed apart


def is_value(text: str) -> bool:
    """A number as printed in a cell ("$ 4,180,339", "(26)%", "1.5x"), not a year (a year names a column)."""
    t = text.strip()
    return bool(t) and bool(NUMBER.fullmatch(t)) and not YEAR.fullmatch(t) and any(c.isdigit() for c in t)


@dataclass
class Seg:
    x0: float
    x1: float
    text: str


@dataclass
class Line:
    y0: float
    y1: float
    segs: list[Seg]
    label: str = ""  # the row label (left-most text segment), when the line has one
    cells: list[Seg] = field(default_factory=list)  # the other segments

    @property
    def has_value(self) -> bool:
        return any(is_value(s.text) for s in self.cells)


def dist(s: Seg, b: tuple[float, float]) -> float:
    """How far a segment lies from a column's x range (0 when they overlap)."""
    return max(0.0, b[0] - s.x1, s.x0 - b[1])


def overlap(s: Seg, b: tuple[float, float]) -> float:
    """How much of a column's x range a segment covers (negative when apart)."""
    return min(s.x1, b[1]) - max(s.x0, b[0])
