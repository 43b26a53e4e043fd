"""Columns whose numbers are labels, not amounts: codes, identifiers, years, phone numbers.

A survey's disposition codes (1.1, 2.11, 4.31), a form's line numbers, a list of years or of phone numbers print
digits a reader never weighs or adds: "which has the higher AAPOR code" asks nothing. A column is one of them when
its name says so ("Code", "ID", "Phone", "No.", a statement's "Notes" column of cross-references) or when its values are written as codes: every one a dotted code
of several points, an integer with a leading zero, a year, or a phone number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAMED = re.compile(r"\b(codes?|ids?|identifiers?|identification|phone|telephone|tel|fax|zip|postal|no|nos|"
                    r"serial|ref|reference|notes?|page|pages|account|ssn|ein|isbn|issn|doi|version|line)\b\.?|#|\bnumber\b(?!\s+of\b)", re.I)
_CODE_VALUE = re.compile(r"\d+\.\d+\.\d+|0\d+|(?:19|20)\d\d|\(?\d{3}\)?[\s.\-]\d{3}[\s.\-]\d{4}|\d+(?:\.\d+)?[a-z]")


def code_column(name: str, values: Iterable[str]) -> bool:
    """Whether a column's numbers are codes, identifiers, years or phone numbers (module doc)."""
    if _NAMED.search(name):
        return True
    vals = [v.strip() for v in values if v.strip()]
    return bool(vals) and all(_CODE_VALUE.fullmatch(v) for v in vals)


def code_columns(header: Iterable[str], cells: Iterable[tuple[str, str, str]]) -> set[str]:
    """The columns of a table (its header, its (row, column, value) cells) whose numbers are codes (`code_column`)."""
    values: dict[str, list[str]] = {}
    for _, col, value in cells:
        values.setdefault(col, []).append(value)
    return {c for c in header if code_column(c, values.get(c, []))}
