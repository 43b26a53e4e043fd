"""Linked two-hop questions over two extracted tables (two pages of one document, or two documents).

The second hop depends on the first, so neither table alone answers:
- bridge (extraction): hop 1 finds a row of table A (the one with the highest value in a column), hop 2 reads that
  row's value in table B; the question never names the row;
- a line item of each table (logic, `line_items`): a named ratio of two statements of one filing (return on
  assets: net income over total assets), or one item (revenue, total assets) of two companies weighed;
- difference / ratio (logic): the same row label (within one filing under the same column name; across filings in
  the same statement: income, balance sheet, cash flows) in both tables (equal but for case, spacing and punctuation; not a
  generic one: "Total" of two tables is two lines), under a column both share (the same column name, or the same
  single year with no other words that disagree: "Six Months ... Worldwide" and "Three Months ... U.S." are two
  periods), same unit; the answer is computed and is printed in neither table. Across documents the two columns
  must also cover the same kind of period, and amounts (money is stated in each filing's own scale) need both
  tables' scales known (`cross_doc`: a difference in one scale, or which company's amount is higher);
  percentages and per-share figures need no scale.
Every question names each table's document (`labels`: company, report, period) and the table by its printed title and
unit (`naming`), by its columns only when no title is printed above it.
Each hop is also returned as a stand-alone sub-question with its own answer and region, so the verifier checks
ambiguity and closed-book answering per hop.
"""

from __future__ import annotations

import random
import re

from vrag_data.qgen.cross_doc import is_amount, money_question, same_kind
from vrag_data.qgen.evidence import Region
from vrag_data.qgen.cells import quantity
from vrag_data.qgen.grid import Grid, generic_label, label_key, table_grid
from vrag_data.qgen.line_items import cross_item, item_pair, statement_ratio
from vrag_data.qgen.statement_items import concept, page_concepts, statement_kind
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.scale import table_scale, zone_above
from vrag_data.qgen.table import Table
from vrag_data.qgen.writer import ORACLE as NAME
from vrag_data.qgen.writer import Hop, Rejected, Written

_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


def unnamed(stem: str) -> Rejected:
    return Rejected("writer", "unnamed_document", f"oracle: no readable name for document {stem!r} on its first page "
                    "(company, report, year); a question could not say which document it means")


def untitled(page_id: str) -> Rejected:
    return Rejected("writer", "untitled_table", f"oracle: the table on {page_id} has no caption, title or lead-in "
                    "sentence; a question naming it by its column headers names no table a reader would look for")


def _is_total(row: str) -> bool:
    """A total line: "Total", "Net total", "EU Total", "All countries", "Sum"."""
    return bool(re.match(r"^(all|sum)\b|.*\btotals?\b", row.strip(), re.I))


def _one_unit(grid: Grid, cells: list[tuple[str, float, str]]) -> bool:
    return len({grid.unit(v, r) for r, _, v in cells}) == 1


def _same_period(ca: str, cb: str) -> bool:
    """Two column names for one period: the same single year, and the other words of one are all in the other
    ("2015" / "Year ended December 31, 2015"), not two periods or places of that year."""
    ya, yb = _YEAR.findall(ca), _YEAR.findall(cb)
    if not (len(ya) == len(yb) == 1 and ya == yb):
        return False
    wa, wb = (set(re.sub(r"[^\w%]+", " ", _YEAR.sub(" ", c.lower())).split()) for c in (ca, cb))
    return wa <= wb or wb <= wa


_PLAIN_WORDS = frozenset({"amount", "amounts", "total", "value", "in", "millions", "thousands", "$"})


def _one_measure(ca: str, cb: str) -> bool:
    """Two column names of one filing that measure one thing: equal, or one year and no other word than an
    "Amount" ("2021" / "2021 Amount"); "Year Ended December 31, 2015" (a flow) and "December 31, 2015" (a balance)
    are two."""
    if ca.lower() == cb.lower():
        return True
    wa, wb = (set(re.sub(r"[^\w%$]+", " ", _YEAR.sub(" ", c.lower())).split()) for c in (ca, cb))
    return _same_period(ca, cb) and (wa ^ wb) <= _PLAIN_WORDS


_TITLE_STOP = frozenset("table tables of the and in for by on to our a an its consolidated condensed statement statements "
                        "data summary selected information reconciliation reconciliations".split())


def _one_subject(a: Table, b: Table) -> bool:
    """Two tables of one filing whose same row can be one line: their names share a word of what they measure
    ("domestic / international segment revenue mix ..."); "Canada" of "Human Capital" and of "merchandise
    inventories" are two measures of one place."""
    wa, wb = (set(re.findall(r"[a-z]{3,}", t.title.lower())) - _TITLE_STOP for t in (a, b))
    return bool(wa & wb)


def _fmt(x: float, like: list[str]) -> str:
    """A computed number with as many decimals as its inputs print (at least what it needs, at most 2)."""
    places = max((len(v.split(".")[-1].rstrip("%)").strip()) if "." in v else 0) for v in like)
    places = min(2, places)
    s = f"{x:,.{places}f}"
    return s if "," in "".join(like) else s.replace(",", "")


def _shared_columns(a: Table, b: Table) -> list[tuple[str, str]]:
    """Column pairs the two tables share: the same name, or names that hold the same single year."""
    pairs = []
    for ca in a.grid.header[1:]:
        for cb in b.grid.header[1:]:
            if not ca or not cb:
                continue
            if ca.lower() == cb.lower() or _same_period(ca, cb):
                pairs.append((ca, cb))
    return pairs


def bridge(rng: random.Random, a: Table, b: Table) -> Written | Rejected:
    """Hop 1: the row of A with the highest value in a column; hop 2: that row's value in a column of B."""
    rows_b = {r for r, _, _ in b.grid.cells}
    options = []
    for col in dict.fromkeys(c for _, c, _ in a.grid.cells):
        cells = a.numbers(col)
        if len(cells) < 2 or not _one_unit(a.grid, cells):
            continue
        if any(_is_total(r) for r, c, _ in (*a.grid.cells, *a.grid.dropped) if c == col):
            continue  # "the highest" with or without the total line: a reader cannot tell which is meant
        top = max(n for _, n, _ in cells)
        winners = [r for r, n, _ in cells if n == top]
        if len(winners) != 1 or _is_total(winners[0]) or generic_label(winners[0]) or winners[0] not in rows_b:
            continue
        # a row not asked about (its label unreadable or too long) still counts: it may hold the highest value, or
        # a value no number can stand for ("3,5,7" options): then "the highest" is not known
        if any(q is None or q >= top for q in (quantity(v) for _, c, v in a.grid.dropped if c == col)):
            continue
        # an asked row whose cell is no number ("**": a change not meaningful, "n/m") may be the highest too
        if any(c == col and quantity(v) is None for _, c, v in a.grid.cells):
            continue
        row_a = {v for r, _, v in a.grid.cells if r == winners[0]}
        for r, cb, vb in b.grid.cells:
            # the base line of a statement as a percentage of it ("Revenue | 100.0 %") answers itself, and a value
            # table A already prints in that row needs no second table
            if r == winners[0] and vb not in row_a and not (cb in b.grid.percent_columns and quantity(vb) == 100):
                options.append((col, winners[0], next(v for rr, _, v in cells if rr == r), cb, vb))
    if not options:
        return Rejected("writer", "writer_declined", "oracle: no row that is the highest of a column in one table "
                        "and has a value in the other")
    col, row, va, cb, vb = rng.choice(options)
    q = (f"In {a.where}, one row has the highest {col} value; what is that row's {cb} value in {b.where}?")
    hops = (Hop(f"In {a.where}, which row has the highest {col} value?", row, a.region),
            Hop(f"In {b.where}, what is the {cb} value of {row}?", vb, b.region))
    return Written(q, vb, "Str", "extraction", (va, vb), NAME, ((a.region, row, col, va), (b.region, row, cb, vb)), hops)


def arithmetic(rng: random.Random, a: Table, b: Table) -> Written | Rejected:
    """One value from each table in a column they share; the question asks for their difference or ratio."""
    options, money = [], []
    cross = a.label != b.label
    # the same line (row label) in both tables, under a column they share: a difference between two unrelated lines
    # is well defined but no question a person would ask
    one_statement = statement_kind(a.title) is not None and statement_kind(a.title) == statement_kind(b.title)
    for ca, cb in _shared_columns(a, b):
        if cross and not (same_kind(a, ca, b, cb) and one_statement):  # "Three Months Ended ... 2023" is no year 2023
            continue
        # within one filing the same line of two tables is one measure only under one column measure ("Comparable
        # sales 2022" of two segments); "Canada" under "Number of Employees 2020" and under "2020" is not
        if not cross and not _one_measure(ca, cb):
            continue
        for ra, na, va in a.numbers(ca):
            for rb, nb, vb in b.numbers(cb):
                ua, ub = a.grid.unit(va, ra, ca), b.grid.unit(vb, rb, cb)
                # the same line under the same section: "Card Member receivables" under "Provisions for credit
                # losses" is a provision, not the receivables balance of another table
                same_line = label_key(ra) == label_key(rb) \
                    and a.grid.sections.get(ra, "") == b.grid.sections.get(rb, "")
                # the same amount printed with two signs (an expense positive in one table, in parentheses in the
                # other) is one figure: its "difference" means nothing
                if not same_line or generic_label(ra) or abs(na) == abs(nb) or 0 in (na, nb):
                    continue
                if not cross and concept(ra) is None and not _one_subject(a, b):  # a place or segment of two measures
                    continue
                # two filings state money in their own scale (thousands, millions): shares need none, amounts both
                if (not cross or ua.split(":")[0] in ("share", "per-share")) and ua == ub:
                    options.append((ca, ra, na, va, cb, rb, nb, vb))
                elif cross and is_amount(a, b, ra, ua, ub):
                    money.append((ca, ra, na, va, cb, rb, nb, vb))
    if money and (not options or rng.random() < 0.5):
        out = money_question(rng, a, b, money)
        if out is not None:
            return out
    if not options:
        return Rejected("writer", "writer_declined", "oracle: no row label with values of one unit under a column "
                        "both tables share" + (" (across documents: same period kind, both scales known)" if cross
                                               else ""))
    ca, ra, na, va, cb, rb, nb, vb = rng.choice(options)
    hop_a = Hop(f"In {a.where}, what is the {ca} value of {ra}?", va, a.region)
    hop_b = Hop(f"In {b.where}, what is the {cb} value of {rb}?", vb, b.region)
    cells = ((a.region, ra, ca, va), (b.region, rb, cb, vb))
    first = f"the {ca} value of {ra} in {a.where}"
    second = f"the {cb} value of {rb} in {b.where}"
    if na > 0 and nb > 0 and not a.grid.unit(va, ra, ca).startswith("share") and 0.01 <= na / nb <= 100 \
            and rng.random() < 0.4:
        ratio = na / nb
        q = f"What is the ratio of {first} to {second}, rounded to two decimals?"
        return Written(q, f"{ratio:.2f}", "Float", "logic", (va, vb), NAME, cells, (hop_a, hop_b))
    diff = na - nb
    # "(5,499) minus (6,881)": without a sign rule a reader may take the sizes of two outflows
    signed = ", each with its printed sign (an amount in parentheses is negative)" if na < 0 or nb < 0 else ""
    q = f"What is {first} minus {second}{signed}, as a plain number?"
    fmt = "Int" if float(diff).is_integer() and "." not in va + vb else "Float"
    return Written(q, _fmt(diff, [va, vb]), fmt, "logic", (va, vb), NAME, cells, (hop_a, hop_b))


def linked(rng: random.Random, regions: tuple[Region, ...], labels: dict[str, str], qtype: str) -> Written | Rejected:
    """A two-hop question over two table regions: a bridge for extraction, a difference or ratio for logic."""
    tables = []
    for i, r in enumerate(regions):
        grid = table_grid(r.text)
        if grid.problem:
            return Rejected("writer", "table_malformed", f"oracle: {grid.problem}")
        if not labels.get(r.stem):
            return unnamed(r.stem)
        zone = zone_above(r.text, r.page.text)
        tables.append(Table(grid, labels[r.stem], i, table_scale(r.text, r.page.text), " ".join(zone),
                            table_name(r.text, r.page.text, r.page.tables_md), page_concepts(r.page.text)))
    a, b = tables
    for t in tables:
        if not t.title:
            return untitled(regions[t.region].page_id)
    if a.label == b.label and a.title.lower() == b.title.lower():  # one name twice: no question tells them apart
        return Rejected("writer", "writer_declined", f"oracle: two tables named {a.title!r} in one document")
    if qtype == "extraction":  # a bridge row, else the two line items of a named ratio or of two companies
        out = bridge(rng, a, b)
        out = out if isinstance(out, Written) else bridge(rng, b, a)
        return out if isinstance(out, Written) else item_pair(rng, a, b)
    # a line item of each statement (a named ratio in one filing; one item of two companies), or the same line
    item = statement_ratio(rng, a, b) if a.label == b.label else cross_item(rng, a, b)
    if isinstance(item, Written) and rng.random() < 0.6:
        return item
    same_line = arithmetic(rng, a, b)
    return same_line if isinstance(same_line, Written) or not isinstance(item, Written) else item
