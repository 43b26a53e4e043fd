"""How a question names a table: by what it measures (the title printed above it and the scale its amounts are
stated in: "the Consolidated Statements of Cash Flows table (in millions) in <document>"), and by its column names
only when the page prints no title for it. A reader of the document finds a table by its title; a list of column
headers ("MAY 31, 2021, MAY 31, 2020") names no table a person would ask about."""

from __future__ import annotations

import re

from vrag_data.qgen.grid import Grid
from vrag_data.qgen.periods import period_kinds
from vrag_data.qgen.scale import WORDS, table_scale, zone_above


def title_of(table_md: str, page_text: str) -> str:
    """The title printed right above a table on its page, or ""."""
    return table_title(zone_above(table_md, page_text))


def describe(grid: Grid, label: str, title: str, scale: float | None) -> str:
    """The phrase a question names a table by: its title and unit, else its columns; then its document."""
    if title:
        unit = f" (in {WORDS[scale]})" if scale in WORDS else ""
        return f"the {title} table{unit} in {label}"
    return f"the table with the columns {grid.columns_phrase()} in {label}"


def region_where(table_md: str, page_text: str, grid: Grid, label: str) -> str:
    """`describe` for a table region read from its page."""
    return describe(grid, label, title_of(table_md, page_text), table_scale(table_md, page_text))


_TITLE_WORDS = re.compile(r"[A-Za-z][A-Za-z'&,\u2013\u2014-]*|[&\u2013\u2014-]")


def table_title(zone: list[str]) -> str:
    """The title printed right above a table ("Consolidated Statements of Income", "PARENT COMPANY - CONDENSED
    BALANCE SHEETS", "Other Earnings Items"), nearest first, or "": a line of 2-10 words without digits, every word
    of four letters or more capitalised; no unit statement, period line or "Table of Contents"."""
    for line in zone:
        words = line.split()
        if not 2 <= len(words) <= 10 or re.search(r"\d|[.:;(]", line) or not all(_TITLE_WORDS.fullmatch(w) for w in words):
            continue
        if re.fullmatch(r"table of contents", line.strip(), re.I) or period_kinds(line) or re.search(r"\bended\b", line, re.I):
            continue
        if words[0][0].isupper() and all(w[0].isupper() for w in words if len(w) >= 4 and w[0].isalpha()):
            return " ".join((w.capitalize() if len(w) > 3 else w.lower()) if line.isupper() else w for w in words)
    return ""
