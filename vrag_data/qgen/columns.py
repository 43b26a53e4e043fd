"""Whether two tables' column lists are the same columns, as a reader would judge (the verifier's check that a
competing page prints the asked table again)."""

from __future__ import annotations

import re


def _one_edit(a: str, b: str) -> bool:
    """`a` and `b` differ by at most one letter (substituted, added or left out)."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) <= 1
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def same_columns(a: list[str], b: list[str]) -> bool:
    """Two column lists a reader could not tell apart: equal but for case, spacing or one letter of a name of four
    or more (a text layer's typo: "Unita" / "Units"); digits must match ("2023" / "2022" are two columns)."""
    if len(a) != len(b):
        return False
    norm = [(" ".join(x.lower().split()), " ".join(y.lower().split())) for x, y in zip(a, b)]
    return all(x == y or (min(len(x), len(y)) >= 4 and re.sub(r"\D", "", x) == re.sub(r"\D", "", y) and _one_edit(x, y))
               for x, y in norm)
