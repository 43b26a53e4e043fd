"""The kind of period a column or a line speaks of (three, six, nine or twelve months), from its words."""

from __future__ import annotations

import re

_KINDS = (("3m", re.compile(r"\bthree[- ]months?\b|\bquarters?\b|\bq[1-4]\b|\b1[23] weeks\b", re.I)),
          ("6m", re.compile(r"\bsix[- ]months?\b|\bhalf[- ]year\b|\b2[46] weeks\b", re.I)),
          ("9m", re.compile(r"\bnine[- ]months?\b|\b3[69] weeks\b", re.I)),
          ("12m", re.compile(r"\btwelve[- ]months?\b|\byears?\b|\bfiscal\b|\bfy\b|\bannual\b|\b5[23] weeks\b", re.I)))
ANNUAL_DOC = re.compile(r"\bForm (10-K|20-F|40-F)\b|\bfiscal year\b|\bannual report\b", re.I)


def period_kinds(text: str) -> set[str]:
    """Every kind of period `text` names ("fiscal quarter" names two)."""
    return {k for k, rx in _KINDS if rx.search(text)}


def period_kind(col: str, first_header: str, doc_label: str, above: str = "") -> str | None:
    """The kind of period a column covers ("3m", "6m", "9m", "12m"), or None when not known for sure: named by the
    column, else the table's first header cell, else the page lines right above the table, else the document."""
    for text in (col, first_header, above):
        found = period_kinds(text)
        if len(found) == 1:
            return next(iter(found))
        if found:  # "fiscal quarter": two kinds named, none known
            return None
    return "12m" if ANNUAL_DOC.search(doc_label) and not period_kinds(doc_label) - {"12m"} else None


_MONTH_DAY = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2})\b")


def month_day(text: str) -> str:
    """The one month and day `text` names ("September 30"), "" when it names none or several."""
    days = {(m.group(1), int(m.group(2))) for m in _MONTH_DAY.finditer(text)}
    if len(days) != 1:
        return ""
    m = next(_MONTH_DAY.finditer(text))
    return " ".join(m.group(0).split())


def end_day(col: str, above: str = "") -> str:
    """The day a column's period ends: named by the column, else by the one date of the lines above its table
    ("Three Months Ended / September 30," over "2023 | 2022"); "" when not known."""
    return month_day(col) or ("" if _MONTH_DAY.search(col) else month_day(above))
