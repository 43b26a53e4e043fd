"""The scale a table states its amounts in ("(in millions)", "(Dollars in thousands, except per share)").

Two filings state money each in its own scale, so amounts of two documents are compared or subtracted only when
both scales are known. The statement is read from the table's own text (a header cell or a unit line kept in it),
else from the page text right above the table: the nearest statement before the table's first row label, with no
amount printed between them (an amount there belongs to another table, whose statement this one need not share).
A statement naming another currency than dollars ("in millions of euros", "€ in millions") gives no scale: a
difference of dollars and euros is no question. `None` = unknown: no amount arithmetic across documents.
"""

from __future__ import annotations

import re

from vrag_data.qgen.cells import is_value
from vrag_data.qgen.grid import markdown_rows

SCALES = {"thousands": 1e3, "millions": 1e6, "billions": 1e9}
WORDS = {v: k for k, v in SCALES.items()}
# "(in millions)", "($ in millions, except per share data)", "(Millions, except percentages ...)", "(Amounts in
# thousands)", "(Millions of dollars)", "$ in millions" at a line's start; not "shares in millions" (a count)
_STATEMENT = re.compile(
    r"(?:^|\()\s*(?:(?:u\.?\s?s\.?\s*)?(?:\$|dollars?|amounts?|usd)\s*)?(?:\bin\s+)?(thousands|millions|billions)\b"
    r"(?:\s+of\s+(?:u\.?\s?s\.?\s*)?(?:dollars|usd))?\s*(?=[,;)]|except\b|$)", re.I)
_OTHER_CURRENCY = re.compile(r"[\u20ac\u00a3\u00a5\u20b9]|\b(euros?|pounds?|yen|rupees?|rs\.?|inr|rmb|yuan|chf|gbp|"
                             r"eur|jpy|aud|cad|a\$|c\$)\b", re.I)
MAX_LINE = 160
ZONE_LINES = 32  # a stacked header of six period columns prints some twenty lines between the unit line and the rows


def statements(line: str) -> set[float] | None:
    """The scales a short line states; None when it states one in a currency other than dollars."""
    if len(line) > MAX_LINE:
        return set()
    found = {SCALES[m.group(1).lower()] for m in _STATEMENT.finditer(line.strip())}
    if found and _OTHER_CURRENCY.search(line):
        return None
    return found


def _one(lines: list[str]) -> float | None | str:
    """The one scale stated in `lines`; None when none; "conflict" when several or a foreign currency."""
    found: set[float] = set()
    for line in lines:
        got = statements(line)
        if got is None:
            return "conflict"
        found |= got
    if len(found) > 1:
        return "conflict"
    return next(iter(found)) if found else None


def _row_labels(table_md: str) -> list[str]:
    return [r[0] for r in markdown_rows(table_md)[1:] if r and r[0]]


def zone_above(table_md: str, page_text: str, max_lines: int = 20) -> list[str]:
    """The page-text lines right above a table's first row label (nearest first), up to an amount of another table
    or `max_lines`; [] when the label is not found once (which table it starts is then not known)."""
    lines = page_text.splitlines()
    for label in _row_labels(table_md)[:3]:
        hits = [i for i, ln in enumerate(lines) if " ".join(ln.split()) == " ".join(label.split())]
        if len(hits) != 1:
            continue
        out = []
        for j in range(hits[0] - 1, max(-1, hits[0] - 1 - max_lines), -1):
            line = lines[j].strip()
            if is_value(line.replace("$", "").strip()):  # an amount: the rows of another table lie above
                break
            out.append(line)
        return out
    return []


def _above(zone: list[str]) -> float | None:
    """The scale stated nearest above the table (see the module note)."""
    for line in zone:
        got = statements(line)
        if got is None or len(got) > 1:
            return None
        if got:
            return next(iter(got))
    return None


def table_scale(table_md: str, page_text: str) -> float | None:
    """The scale of a table's amounts (1e3, 1e6, 1e9), or None when not known for sure."""
    own = _one([c for line in table_md.splitlines() for c in line.split("|")])
    if own == "conflict":
        return None
    if own is not None:
        return float(own)
    return _above(zone_above(table_md, page_text, ZONE_LINES))
