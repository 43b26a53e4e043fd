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
