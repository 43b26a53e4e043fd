"""Which of two rows of an extracted table has the higher value: the pairs a reader would weigh.

Two positive amounts of one column, one unit and one section (the lines of one statement a reader weighs against
each other, between two of its totals); never a code or an identifier, a part and its total (by its label, by
being named as its section, or by adding up the lines above it), basic and diluted of one figure, two periods'
lines, a step of a reconciliation ("Less: ..."), signed changes of balances, or a column of different settings.
"""

from __future__ import annotations

import random
import re

from vrag_data.qgen.cells import plain, quantity
from vrag_data.qgen.codes import code_columns
from vrag_data.qgen.grid import Grid, section_key
from vrag_data.qgen.periods import period_kinds
from vrag_data.qgen.writer import ORACLE as NAME
from vrag_data.qgen.writer import Rejected, Written

_CHANGES = re.compile(r"\bchanges? in\b", re.I)
_BASIC_DILUTED = re.compile(r"\b(basic|diluted)\b", re.I)
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


# a subtotal or result line: weighed against a line that feeds it, it answers itself (gross profit > operating income)
_SUBTOTAL = re.compile(r"^(total|subtotal|net cash|net (income|earnings|loss|sales|revenues?)|gross (profit|margin)|"
                       r"operating (income|profit|loss)|(income|earnings|loss|profit) (before|from)|ebitd?a\b|"
                       r"adjusted ebitd?a|revenues?$|sales$|cash and cash equivalents|net (financial |current )?(assets|liabilities)|net debt|"
                       r"(cash|funds) (provided|used|generated)|"
                       r"accumulated (surplus|deficit))|(beginning|end) of (the )?(year|period)",
                       re.I)  # and a balance (cash at the start of the year) against a flow of the year


_COUNT_OF = re.compile(r"^\s*(#|number\s+of\b|no\.\s+of\b|num\b)|\b(size|count)\s*$", re.I)


def _pairable(ra: str, rb: str) -> bool:
    """Two rows a reader would compare: not a part against its total ("Net sales" / "Total net sales", a label
    whose words all lie in the other's), not basic against diluted of one figure (they differ by dilution only),
    not two rows that name periods ("Net earnings, three months 2023" / "... six months 2022": two periods'
    lines compared in one column say nothing)."""
    if all(_COUNT_OF.search(r) for r in (ra, rb)):  # "#problems" and "#samples": counts of different things
        return False
    wa, wb = (set(re.sub(r"[^a-z0-9]+", " ", r.lower()).split()) - {"total", "net", "of", "the"} for r in (ra, rb))
    if not wa or not wb or wa <= wb or wb <= wa:
        return False
    if any(_YEAR.search(r) or period_kinds(r) or _SUBTOTAL.search(r) for r in (ra, rb)):
        return False
    return not (_BASIC_DILUTED.search(ra) and _BASIC_DILUTED.search(rb)
                and _BASIC_DILUTED.sub("", ra.lower()).strip() == _BASIC_DILUTED.sub("", rb.lower()).strip())


def _blocks(grid: Grid) -> dict[tuple[str, str], int]:
    """Each cell's block in its column: how many totals and result lines of the same unit stand above it. Lines
    between two of them are one group a reader weighs (net product and service sales; the investing flows); across
    one, a sales line and a tax line, an asset and a liability, are no comparison."""
    out: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], int] = {}
    for row, col, value in grid.cells:
        unit = grid.unit(value, row, col)
        out[(row, col)] = seen.get((col, unit), 0)
        if _SUBTOTAL.search(row):
            seen[(col, unit)] = seen.get((col, unit), 0) + 1
    return out


def _heads_itself(row: str, head: str) -> bool:
    """A row named as its section ("Acquisition Cost" under "Acquisition costs"): the section's total."""
    a, b = (re.sub(r"s\b", "", section_key(x)) for x in (row, head))
    return bool(a and b) and (a.startswith(b) or b.startswith(a))


_STEP = re.compile(r"^\s*(less|add|deduct|plus|minus)\b\s*:?", re.I)


def _sums(grid: Grid) -> set[tuple[str, str]]:
    """Cells that equal the sum of two or more cells right above them in their column: a total whatever its label
    says ("Acquisition Cost" under its parts); weighed against one of its parts it answers itself."""
    out: set[tuple[str, str]] = set()
    for col in grid.header:
        run = [(row, quantity(v)) for row, c, v in grid.cells if c == col]
        for i, (row, n) in enumerate(run):
            if n is None or i < 2:
                continue
            total = 0.0
            for k, (_, m) in enumerate(reversed(run[:i])):
                if m is None:
                    break
                total += m
                if k >= 1 and abs(total - n) <= max(1.0, abs(n) * 1e-3):
                    out.add((row, col))
                    break
    return out


MAX_PLAIN_SPREAD = 20.0  # largest / smallest of a column of bare numbers that measure one thing


def _one_quantity(key: str, values: list[tuple[str, float, str]]) -> bool:
    """Whether a column's bare numbers (no currency, no share) measure one thing, so any two rows can be weighed:
    printed with the same decimals and within `MAX_PLAIN_SPREAD` of each other. A column of settings ("Number of
    layers 24", "Hidden size 1024", "Dropout 0.1") is a list of different quantities; "which is higher" of two of
    them asks nothing."""
    if key.split("\x00")[1] != "plain":
        return True
    ns = [n for _, n, _ in values]
    decimals = {len(v.replace(",", "").split(".")[1]) if "." in v else 0 for _, _, v in values}
    return len(decimals) == 1 and max(ns) <= MAX_PLAIN_SPREAD * min(ns)


def weigh(rng: random.Random, grid: Grid, where: str) -> Written | Rejected:
    """"Which has the higher value" of two rows of one column of `grid` (named by `where`), or why none."""
    by_col: dict[str, list[tuple[str, float, str]]] = {}
    blocks = _blocks(grid)
    codes = code_columns(grid.header, grid.cells)
    totals = _sums(grid)
    for row, col, value in grid.cells:
        if col in codes or (row, col) in totals:  # a code, an identifier, a year or a phone number is no amount to
            continue  # weigh; a line that adds up the lines above it holds them
        n = quantity(value)  # a year is a date, not an amount to compare
        # a total beside its parts answers itself; lines under "Changes in operating assets and liabilities" are
        # signed changes of balances, not amounts one weighs against another
        # a deduction or an addition ("Less: sinking fund assets") is a step of a reconciliation, no line to weigh
        if n is not None and n > 0 and not row.lower().startswith("total") and not _STEP.match(row) \
                and not _heads_itself(row, grid.heads.get(row, "")) \
                and not _CHANGES.search(grid.heads.get(row, "")):
            key = f"{col}\x00{grid.unit(value, row, col)}\x00{grid.sections.get(row, '')}\x00{blocks[(row, col)]}"
            by_col.setdefault(key, []).append((row, n, value))
    usable = sorted(c for c, vs in by_col.items() if len({n for _, n, _ in vs}) >= 2 and _one_quantity(c, vs))
    if not usable:
        return Rejected("writer", "writer_declined", "oracle: no column with two different positive amounts of one "
                        "unit and section to compare")
    key = rng.choice(usable)
    col = key.split("\x00")[0]
    pairs = [(x, y) for i, x in enumerate(by_col[key]) for y in by_col[key][i + 1:] if x[1] != y[1] and _pairable(x[0], y[0])]
    if not pairs:
        return Rejected("writer", "writer_declined", "oracle: only a part and its total, basic and diluted, or two "
                        "periods' lines to compare")
    (ra, na, va), (rb, nb, vb) = rng.choice(pairs)
    pa, pb = grid.row_phrase(ra), grid.row_phrase(rb)
    q = f"In {where}, which has the higher {plain(col)} value: {pa} or {pb}?"
    return Written(q, plain(ra) if na > nb else plain(rb), "Str", "logic", (va, vb), NAME, ((0, ra, col, va), (0, rb, col, vb)))
