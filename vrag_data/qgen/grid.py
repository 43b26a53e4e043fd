"""Extracted tables read for questions: a markdown table -> named columns, unique readable row labels, clean values.

Only what makes a well-formed question is kept: a table whose first row is data, whose column names text extraction
broke or smeared, or that has values under unnamed columns gives nothing; rows whose label is not readable text,
is not unique, or runs on into a column of numbers are dropped. `cell_at` re-reads a value at (row, column).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_NUMBER = re.compile(r"[-+\u2212(]?\s*[$\u20ac\u00a3]?\s*\d[\d,.]*\s*(%|pp|bps|x)?\)?", re.I)
_EMPTY = {"", "-", "\u2013", "\u2014", "n/a", "na", "nm", "*"}
MAX_HEADER_CHARS, MAX_LABEL_CHARS, MAX_COLUMNS_NAMED = 60, 80, 4


_YEAR = re.compile(r"(FY\s?)?(19|20)\d\d", re.I)


def is_number(cell: str) -> bool:
    return bool(_NUMBER.fullmatch(cell.strip()))


def is_value(cell: str) -> bool:
    """A number that is not a year (a year names a column or a row: "2023")."""
    return is_number(cell) and not _YEAR.fullmatch(cell.strip())


@dataclass(frozen=True)
class Grid:
    """A markdown table read for questions: named columns and rows with a unique, non-numeric label."""

    header: list[str]
    cells: list[tuple[str, str, str]]  # (row label, column name, value as printed)
    problem: str = ""  # why the table gives no question (empty when it does)

    def columns_phrase(self) -> str:
        named = [h for h in self.header[1:] if h]
        more = f" and {len(named) - MAX_COLUMNS_NAMED} more" if len(named) > MAX_COLUMNS_NAMED else ""
        return ", ".join(named[:MAX_COLUMNS_NAMED]) + more


_SHORT_OK = frozenset("a i of in to at by on or vs no us uk eu fy q1 q2 q3 q4 h1 h2 % & $ # + - ( )".split())


def clean_name(cell: str) -> bool:
    """A column name or row label as a reader would type it: not a number, no fragment left by text extraction
    (a stray letter such as "Three o", a cut word such as "th Ended"), no value glued to its end ("Some college 69")."""
    toks = cell.split()
    if not toks or is_value(cell) or cell.startswith("(") and cell.endswith(")"):
        return False
    if cell.count("(") != cell.count(")"):  # "EPS (Diluted Net EBITDA": two header cells run together
        return False
    if not re.search(r"[A-Za-z]{2,}|\d", cell):  # "/S/" (a signature mark), "—"
        return False
    if any(len(t) <= 2 and t.isalpha() and t.lower() not in _SHORT_OK for t in toks):
        return False
    if toks[0][0].islower() and len(toks[0]) <= 3 or toks[0] in ("-", "\u2013", "\u2022"):  # "th Ended", "d", "- Self-Ask"
        return False
    return not (len(toks) > 1 and is_number(toks[-1]) and not re.fullmatch(r"(19|20)\d\d", toks[-1]))


def clean_value(cell: str) -> bool:
    c = cell.strip()
    if c.lower() in _EMPTY or len(c) > 40:
        return False
    return not re.search(r"%\s*%|\$\s*\$|\s{2,}|\$$", c)  # "29% %", "$ 1,874 $": two cells run together


def _smeared(cols: list[str]) -> bool:
    """Column names that a header merge garbled: the group label of some columns glued into every name after their
    shared prefix ("... 2022 Rigid Flexibles", "... 2022 Rigid Packaging", ...), or "less/more than" cut from its
    number ("Payments due by Period Less than Total")."""
    if any(re.search(r"\b(less|more) than (?![\d$])", c, re.I) for c in cols):
        return True
    groups: dict[str, list[str]] = {}
    for c in cols:
        m = re.match(r"(.*\b(?:19|20)\d\d)\s+(\S.*)$", c)  # a dated group: "<period ending YYYY> <rest>"
        if m:
            groups.setdefault(m.group(1), []).append(m.group(2))
    for rests in groups.values():
        firsts = {r.split()[0] for r in rests if len(r.split()) >= 2}
        if len(rests) >= 3 and len(firsts) == 1 and all(len(r.split()) >= 2 for r in rests):
            return True
    return False


def table_grid(text: str) -> Grid:
    """Parse a markdown table and keep only what makes a well-formed question: every column named, once, by a
    readable name (a table whose first row is data, or whose names text extraction broke, has nothing to ask by),
    rows whose label is readable text and unique, and cells with a clean value."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.strip().startswith("|") and not re.fullmatch(r"[|\-:\s]+", line.strip())]
    if len(rows) < 2 or len(rows[0]) < 2:
        return Grid([], [], "fewer than 2 rows or 2 columns")
    header = rows[0]
    cols = [h for h in header[1:] if h]
    if not cols or sum(is_value(h) for h in cols) * 2 >= len(cols):
        return Grid(header, [], "the first row holds values, not column names")
    if len(set(cols)) < len(cols) or not all(clean_name(h) and len(h) <= MAX_HEADER_CHARS for h in cols):
        return Grid(header, [], "column names repeated or broken by text extraction")
    words = [frozenset(h.lower().split()) for h in cols]
    if any(i != j and a <= b for i, a in enumerate(words) for j, b in enumerate(words)):  # "Six Months" / "Six Months Ended"
        return Grid(header, [], "one column name is part of another (a header split by text extraction)")
    if _smeared(cols):
        return Grid(header, [], "a group header smeared over its columns, or a column name cut by text extraction")
    body = [r for r in rows[1:] if len(r) == len(header)]
    if any(not header[j] and r[j] and r[j] not in _EMPTY for r in body for j in range(1, len(header))):
        return Grid(header, [], "values under unnamed columns (a range or a note split over cells)")
    # a text cell in a column of numbers is the rest of a row label ("Comparable Constant Currency | Growth % | (4)")
    numeric = {j for j in range(1, len(header))
               if sum(is_number(r[j]) for r in body) * 5 >= 3 * max(1, sum(bool(r[j]) and r[j] not in _EMPTY for r in body))}
    body = [r for r in body if not any(r[j] and r[j].lower() not in _EMPTY and not is_number(r[j]) for j in numeric)]
    labels = Counter(r[0] for r in body)
    cells = [(r[0], header[j], r[j]) for r in body
             if labels[r[0]] == 1 and clean_name(r[0]) and len(r[0]) <= MAX_LABEL_CHARS
             for j in range(1, len(header)) if header[j] and clean_value(r[j]) and r[j] != r[0] and r[j] != header[j]]
    if not cells:
        return Grid(header, [], "no row with a unique readable label and a value under a named column")
    return Grid(header, cells)


def cell_at(text: str, row: str, col: str) -> str | None:
    """The value at (row label, column name) of a markdown table, read again from the region's text; None when that
    row or column is missing or not unique (then the pair names no single cell)."""
    grid = table_grid(text)
    hits = [v for r, c, v in grid.cells if r == row and c == col]
    return hits[0] if len(hits) == 1 else None


def unit(value: str, label: str) -> str:
    """What a number counts, roughly: rows are compared only within one unit."""
    v, lab = value.lower(), label.lower()
    rate = lab.rstrip(" ()%").endswith("rate")  # "tax rate", not "effect of exchange rate changes"
    if "%" in v or "percent" in v or "%" in lab or "percent" in lab or "margin" in lab or rate:
        return "share"
    if "per share" in lab:
        return "per-share"
    return "$" if "$" in v else "plain"


def number(value: str) -> float | None:
    if not is_number(value):
        return None
    v = re.sub(r"[^\d.]", "", value.replace(",", ""))
    try:
        n = float(v)
    except ValueError:
        return None
    return -n if value.strip().startswith(("-", "\u2212", "(")) else n
