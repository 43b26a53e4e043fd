"""Financial statement line items a reader asks about across tables: revenue, net income, total assets, ...

Two tables of one filing rarely print the same line, but a reader links them all the time: net income from the
income statement over total assets from the balance sheet is the return on assets. A line item is recognised by
its row label (the whole label, after case, footnote marks and punctuation: "Net earnings", "Total net sales",
"Cash and cash equivalents"), so a linked question can
- within one document, divide a line of one statement by a line of another (`RATIOS`): two flows over one period
  (twelve months, or a quarterly filing's three, six or nine months: capital expenditures over revenue for the six
  months ending in 2023), or a flow over twelve months (the income or cash-flow statement) by the balance at that
  fiscal year's end (an annual filing's or a fourth-quarter release's; a quarterly filing's balance is no fiscal
  year's, and a quarter's flow over a balance is no ratio a reader quotes); never a parent-only
  or guarantor statement, and only from the company's statements (a title naming the income statement, balance sheet,
  cash flows, equity or selected financial data; not a segment's or a region's table);
- across documents, weigh the same line item of two companies for one fiscal year, or for one interim period that
  ends on the same date in both (`cross_item`), in dollars (each filing's stated scale applied).
An outflow printed negative (capital expenditures, dividends paid) is used as its size, and the question says so.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from vrag_data.qgen.cross_doc import PART_OF_GROUP, company
from vrag_data.qgen.cells import plain, quantity
from vrag_data.qgen.periods import ANNUAL_DOC, end_day, period_kind
from vrag_data.qgen.scale import WORDS
from vrag_data.qgen.statement_items import ITEMS, OUTFLOWS, RATIOS, candidates
from vrag_data.qgen.table import Table
from vrag_data.qgen.writer import ORACLE as NAME
from vrag_data.qgen.writer import Hop, Rejected, Written


YEAR_END_RELEASE = re.compile(r"\bfourth[- ]quarter\b|\bfull[- ]year\b|\bq4\b|\bfiscal (year )?(19|20)\d\d results\b", re.I)


@dataclass(frozen=True)
class Item:
    concept: str
    row: str
    col: str
    number: float  # its size: an outflow printed negative counts positive
    printed: str
    year: str
    period: str = "12m"  # a flow's period kind ("3m", "6m", "9m", "12m"); a balance's is "end"
    end: str = ""  # the month and day its column names ("June 30"), "" when it names none

    def same_time(self, other: "Item", across: bool = False) -> bool:
        """Both of one fiscal year and period kind; across two companies an interim period must end on one date."""
        if self.year != other.year or self.period != other.period:
            return False
        return not across or self.period in ("12m", "end") or bool(self.end) and self.end == other.end

    @property
    def when(self) -> str:
        """The period a question names: "the fiscal year ending in 2023", "the six months ending in 2023"."""
        if self.period in ("12m", "end"):
            return f"the fiscal year ending in {self.year}"
        months = {"3m": "three", "6m": "six", "9m": "nine"}[self.period]
        return f"the {months} months ending {'on ' + self.end + ', ' if self.end else 'in '}{self.year}"


def items(t: Table) -> list[Item]:
    """The line items of a table (`statement_items.candidates`) with a positive size in dollars, of the whole company,
    over a known period for a flow (three, six, nine or twelve months, read from the column, the table's first
    header cell, the lines above it or the document's name), at a fiscal year's end for a balance (a quarterly
    filing's balance is no fiscal year's)."""
    if PART_OF_GROUP.search(f"{t.title} {t.above}"):  # a parent-only or guarantor statement: not the company's
        return []
    year_end = bool(ANNUAL_DOC.search(t.label) or YEAR_END_RELEASE.search(t.label))
    out = []
    for c, row, col, value, year in candidates(t.grid, t.title):
        n = quantity(value) or 0.0
        n = abs(n) if c in OUTFLOWS else n
        if n <= 0 or t.grid.unit(value, row, col) not in ("$", "plain") or PART_OF_GROUP.search(row):
            continue
        flow = ITEMS[c][2]
        period = period_kind(col, t.grid.header[0], t.label, t.above) if flow else "end"
        if period is None or (not flow and not year_end):
            continue
        out.append(Item(c, row, col, n, value, year, period, end_day(col, t.above)))
    return out


def _cell(t: Table, it: Item, with_doc: bool = True, as_printed: bool = False) -> str:
    negative = it.concept in OUTFLOWS and it.printed.strip()[:1] in "(-\u2212"
    sign = "" if not negative else ", an outflow printed negative" + ("" if as_printed else ": use its size")
    return f"{plain(it.row)} (the {plain(it.col)} column of {t.where if with_doc else t.named}{sign})"


def _hops(a: Table, x: Item, b: Table, y: Item) -> tuple[tuple, tuple[Hop, Hop]]:
    cells = ((a.region, x.row, x.col, x.printed), (b.region, y.row, y.col, y.printed))
    hops = (Hop(f"In {a.where}, what is the {plain(x.col)} value of {plain(x.row)}?", x.printed, a.region),
            Hop(f"In {b.where}, what is the {plain(y.col)} value of {plain(y.row)}?", y.printed, b.region))
    return cells, hops


def _rounded(x: float) -> tuple[str, str]:
    places = 3 if abs(x) < 1 else 2
    return f"{x:.{places}f}", f"rounded to {'three' if places == 3 else 'two'} decimal places"


def _has(its: list[Item], concept: str, like: Item) -> bool:
    return any(it.concept == concept and it.year == like.year and it.period == like.period for it in its)


def _ratio_options(a: Table, b: Table) -> list[tuple[str, Table, Item, Table, Item]]:
    """Named ratios with the numerator in one table and the denominator in the other, neither table (nor its page)
    printing both (net income over revenue, both on the income statement, needs no second table)."""
    its = {id(a): items(a), id(b): items(b)}
    out = []
    for name, num, den in RATIOS:
        if any({num, den} <= tab.page_items for tab in (a, b)):
            continue
        for (t, u) in ((a, b), (b, a)):
            for x in its[id(t)]:
                for y in its[id(u)]:
                    # two flows of one period; a flow over a balance only over a whole fiscal year
                    if not (x.concept == num and y.concept == den and x.year == y.year and (
                            x.same_time(y) or {x.period, y.period} == {"12m", "end"})):
                        continue
                    if not any(_has(one, num, x) and _has(one, den, y) for one in its.values()):
                        out.append((name, t, x, u, y))
    return out


def _no_ratio() -> Rejected:
    return Rejected("writer", "writer_declined", "oracle: no line item of one table and one of the other that make a "
                    "named ratio for one fiscal year (both tables' scale stated)")


def statement_ratio(rng: random.Random, a: Table, b: Table) -> Written | Rejected:
    """A named ratio of a line of one table over a line of another table of the same filing, one fiscal year."""
    options = _ratio_options(a, b)
    if not options:
        return _no_ratio()
    name, t, x, u, y = rng.choice(options)
    # one filing states its primary statements in one scale: a table whose statement was not read takes the other's
    st, su = t.scale or u.scale or 1.0, u.scale or t.scale or 1.0
    value, rounding = _rounded(x.number * st / (y.number * su))
    when = x.when if x.period != "end" else y.when
    q = f"In {t.label}, what is the {name} for {when}: {_cell(t, x, False)} divided by {_cell(u, y, False)}, {rounding}?"
    cells, hops = _hops(t, x, u, y)
    return Written(q, value, "Float", "logic", (x.printed, y.printed), NAME, cells, hops)


def cross_item(rng: random.Random, a: Table, b: Table) -> Written | Rejected:
    """The same line item of two companies for one fiscal year: which is higher, or their ratio, in dollars."""
    a, b = sorted((a, b), key=lambda t: t.label)  # one order for a pair of filings: drawn either way, one question
    names = company(a.label), company(b.label)
    if not all(names) or names[0].lower() == names[1].lower() or a.scale is None or b.scale is None:
        return Rejected("writer", "writer_declined", "oracle: across documents a line item needs two named companies "
                        "and both tables' stated scale")
    options = [(x, y) for x in items(a) for y in items(b)
               if x.concept == y.concept and x.same_time(y, across=True)
               and x.number * (a.scale or 1) != y.number * (b.scale or 1)]
    if not options:
        return Rejected("writer", "writer_declined", "oracle: no line item both companies report for one fiscal year")
    x, y = rng.choice(options)
    da, db = x.number * (a.scale or 1.0), y.number * (b.scale or 1.0)
    what = ITEMS[x.concept][0]
    cells, hops = _hops(a, x, b, y)
    first, second = f"{names[0]}: {_cell(a, x)}", f"{names[1]}: {_cell(b, y)}"
    if 0.01 <= da / db <= 100 and rng.random() < 0.4:
        value, rounding = _rounded(da / db)
        q = (f"For {x.when}, what is {names[0]}'s {what} divided by {names[1]}'s {what}, in dollars "
             f"({first}; {second}), {rounding}?")
        return Written(q, value, "Float", "logic", (x.printed, y.printed), NAME, cells, hops)
    scales = "" if a.scale == b.scale else f" (the first states amounts in {WORDS.get(a.scale or 0, 'units')}, " \
                                           f"the second in {WORDS.get(b.scale or 0, 'units')})"
    q = (f"Which company reported the higher {what} for {x.when}, {first}, or {second}{scales}? "
         "Answer with the company's name.")
    return Written(q, names[0] if da > db else names[1], "Str", "logic", (x.printed, y.printed), NAME, cells, hops)




def item_pair(rng: random.Random, a: Table, b: Table) -> Written | Rejected:
    """Extraction over two tables: the two line items a named ratio is made of (one filing), or one line item of
    two companies (two filings), for one fiscal year; both values as printed."""
    if a.label == b.label:
        options = [(t, x, u, y, f"the {ITEMS[x.concept][0]} and the {ITEMS[y.concept][0]}")
                   for _, t, x, u, y in _ratio_options(a, b)]
    else:
        a, b = sorted((a, b), key=lambda t: t.label)
        names = company(a.label), company(b.label)
        options = [(a, x, b, y, f"{names[0]}'s and {names[1]}'s {ITEMS[x.concept][0]}") for x in items(a)
                   for y in items(b) if all(names) and x.concept == y.concept and x.same_time(y, across=True)]
    if not options:
        return _no_ratio()
    t, x, u, y, what = rng.choice(options)
    one_doc = t.label == u.label
    where = f"In {t.label}, what" if one_doc else "What"
    when = x.when if x.period != "end" else y.when
    q = (f"{where} were {what} for {when}: {_cell(t, x, not one_doc, True)} and "
         f"{_cell(u, y, not one_doc, True)}? Give both values as printed, in that order.")
    cells, hops = _hops(t, x, u, y)
    return Written(q, json.dumps([x.printed, y.printed], ensure_ascii=False), "List", "extraction",
                   (x.printed, y.printed), NAME, cells, hops)
