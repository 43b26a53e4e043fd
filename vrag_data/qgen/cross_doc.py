"""Linked questions on amounts of two documents (two companies' filings): the same line, the same period, a known scale.

Two documents' amounts are one question only when
- the row label is the same line (equal after case, spacing and punctuation; `table_hops` also asks for the same
  section and no generic label) and is no count or ratio ("Number of employees", "Shares outstanding");
- the two columns name the same fiscal year (`table_hops._same_period`) and the same kind of period: three, six or
  nine months or a year, read from the column name, else the table's first header cell ("Years Ended December 31,"),
  else the page lines right above the table, else the document's name ("Form 10-K ... fiscal year": a bare year is
  a year; a 10-Q's bare year is not known);
- both tables are the whole company's (no parent-company-only, guarantor or closed-group statement above them)
  and state their scale (`scale.table_scale`): a difference only in one scale (the answer in that scale),
  "which is higher" also across scales (compared in dollars).
Each question names both documents and each table by its columns; the answer to "which is higher" is the company's
name as the document's name gives it.
"""

from __future__ import annotations

import random
import re

from vrag_data.qgen.periods import end_day, period_kind
from vrag_data.qgen.scale import WORDS
from vrag_data.qgen.table import Table
from vrag_data.qgen.writer import ORACLE as NAME
from vrag_data.qgen.writer import Hop, Written

Pick = tuple[str, str, float, str, str, str, float, str]  # (col A, row A, number A, printed A, same for B)

# a count, a ratio or a row with its own unit: not an amount in the table's stated scale
_NOT_AMOUNT = re.compile(r"\b(shares?|number|employees|headcount|ratio|days|units|stores|people|percent|rate)\b|%|"
                         r"\((in\s+)?(thousands|millions|billions)\)", re.I)
PART_OF_GROUP = re.compile(r"\b(parent company|registrant|guarant(ee|or|ors)|closed group|issuer|obligor|"
                            r"non-?guarantor|condensed consolidating)\b", re.I)


def same_kind(a: Table, ca: str, b: Table, cb: str) -> bool:
    """Two filings' columns of one period: the same kind, and an interim period (a quarter, six or nine months)
    ending on the same day (Microsoft's quarter to September 30 and Intel's to April 2 are no common period)."""
    ka = period_kind(ca, a.grid.header[0], a.label, a.above)
    if ka is None or ka != period_kind(cb, b.grid.header[0], b.label, b.above):
        return False
    if ka == "12m":
        return True
    da, db = end_day(ca, a.above), end_day(cb, b.above)
    return bool(da) and da == db


def company(label: str) -> str:
    """The company a document's name gives ("the Form 10-K of Amcor Plc for ..." -> "Amcor Plc"), or ""."""
    m = re.match(r"the Form \S+ of (.+?)(?: for the | dated |$)", label)
    if m:
        return m.group(1).strip()
    # a release's headline names its company before the verb ("Amcor reports fiscal 2023 results ...", "Ulta Beauty
    # Announces Fourth Quarter ..."); any other quoted title (a paper, a report) names no company
    m = re.match(r"\u201c(?:[^\u201d]*?:\s*)?([A-Z][\w&.,' -]{1,60}?)\s+(?:announces|reports|reported|posts|"
                 r"delivers|declares|releases)\b[^\u201d]*\u201d", label, re.I)
    if m:
        return m.group(1).strip(" ,")
    m = re.match(r"\u201c([^\u201d]{2,80}?\b(?:Inc\.?|Corp\.?|Corporation|Company|Co\.|plc|PLC|Ltd\.?|Limited|N\.V\.|"
                 r"S\.A\.|AG|SE|LLC|Group|Holdings))\u201d", label)  # a cover that names the company itself
    return m.group(1).strip() if m else ""


def is_amount(a: Table, b: Table, row: str, ua: str, ub: str) -> bool:
    """Both values are money in their table's stated scale (no unit of their own, both scales known), of the whole
    company: a parent-company-only, guarantor or closed-group statement is not what the company reported."""
    return (ua in ("$", "plain") and ub in ("$", "plain") and a.scale is not None and b.scale is not None
            and not _NOT_AMOUNT.search(row) and not PART_OF_GROUP.search(f"{a.above} {b.above}"))


def money_question(rng: random.Random, a: Table, b: Table, options: list[Pick]) -> Written | None:
    """A difference (one scale) or "which is higher" (any two known scales) of the same line in two documents."""
    ca, ra, na, va, cb, rb, nb, vb = rng.choice(options)
    sa, sb = a.scale or 0.0, b.scale or 0.0
    hop_a = Hop(f"In {a.where}, what is the {ca} value of {ra}?", va, a.region)
    hop_b = Hop(f"In {b.where}, what is the {cb} value of {rb}?", vb, b.region)
    cells = ((a.region, ra, ca, va), (b.region, rb, cb, vb))
    first, second = f"the {ca} value of {ra} in {a.where}", f"the {cb} value of {rb} in {b.where}"
    names = company(a.label), company(b.label)
    can_compare = all(names) and names[0].lower() != names[1].lower() and na * sa != nb * sb
    if sa == sb and (not can_compare or rng.random() < 0.5):
        diff = na - nb
        places = max((len(v.split(".")[-1].rstrip(")").strip()) if "." in v else 0) for v in (va, vb))
        text = f"{diff:,.{min(2, places)}f}".replace(",", "")
        q = (f"What is {first} minus {second}, in {WORDS[sa]} as both tables state their amounts, as a plain number?")
        fmt = "Int" if places == 0 else "Float"
        return Written(q, text, fmt, "logic", (va, vb), NAME, cells, (hop_a, hop_b))
    if not can_compare:
        return None
    scale = "" if sa == sb else f" (the first table states amounts in {WORDS[sa]}, the second in {WORDS[sb]})"
    q = f"Which company reported the higher amount: {first}, or {second}{scale}? Answer with the company's name."
    return Written(q, names[0] if na * sa > nb * sb else names[1], "Str", "logic", (va, vb), NAME, cells,
                   (hop_a, hop_b))
