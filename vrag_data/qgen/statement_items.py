"""Financial statement line items recognised by their row label (revenue, net income, total assets, ...) and the
ratios a reader of a filing computes from two of them. Pure: the questions over them are in `line_items`."""

from __future__ import annotations

import re

from vrag_data.qgen.cells import plain, quantity
from vrag_data.qgen.grid import Grid, table_grid
from vrag_data.qgen.periods import period_kind

YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")

# concept -> (what a question calls it, row-label pattern, a flow over a period (True) or a balance at a date)
ITEMS: dict[str, tuple[str, re.Pattern[str], bool]] = {
    k: (name, re.compile(pattern), flow) for k, (name, pattern, flow) in {
        "revenue": ("revenue", r"(total )?(net )?(sales|revenues?)( net)?|revenues? net|total net (sales|revenues?)", True),
        "net_income": ("net income", r"net (income|earnings)( loss)?( attributable to [a-z .,&']+)?", True),
        "operating_income": ("operating income", r"operating income( loss)?|income( loss)? from operations", True),
        "cost_of_sales": ("cost of sales", r"cost of (sales|goods sold|revenues?|products sold)", True),
        "operating_cash_flow": ("cash provided by operating activities",
                                r"(net |total )?cash (provided by|from|generated from|provided by used in|provided by "
                                r"\(used in\)) operating activities", True),
        "capex": ("capital expenditures", r"capital expenditures|(purchases? of|additions to|payments for( the)? (acquisitions? of|purchases? of)?) ?property,? "
                  r"(plant,? )?and equipment( net)?", True),
        "dividends_paid": ("dividends paid", r"(cash )?dividends paid( to [a-z ]+)?", True),
        "total_assets": ("total assets", r"total assets", False),
        "total_liabilities": ("total liabilities", r"total liabilities", False),
        "equity": ("total equity", r"total ((?!.*liabilities)[a-z .&]+ )?(shareholders|stockholders|shareowners|share owners)( s)? equity|"
                   r"total equity",
                   False),
        "inventories": ("inventories", r"(merchandise )?inventor(y|ies)( net)?", False),
        "cash": ("cash and cash equivalents", r"cash and cash equivalents", False),
    }.items()
}
FLOW_STATEMENTS = frozenset({"income", "comprehensive", "cash_flows", "selected"})
BALANCE_STATEMENTS = frozenset({"balance", "selected"})
# a part of the company: a segment's or a region's revenue is not the company's
PART_OF_COMPANY = re.compile(r"\b(segments?|geographic|regions?|regional|international|domestic|product lines?)\b", re.I)
OUTFLOWS = frozenset({"capex", "dividends_paid"})

# (name, numerator, denominator): ratios a reader of a filing computes from two statements
RATIOS: tuple[tuple[str, str, str], ...] = (
    ("return on assets", "net_income", "total_assets"),
    ("asset turnover", "revenue", "total_assets"),
    ("inventory turnover", "cost_of_sales", "inventories"),
    ("ratio of capital expenditures to revenue", "capex", "revenue"),
    ("ratio of cash provided by operating activities to net income", "operating_cash_flow", "net_income"),
    ("dividend payout ratio (dividends paid over net income)", "dividends_paid", "net_income"),
    ("return on equity", "net_income", "equity"),
    ("net margin (net income over revenue)", "net_income", "revenue"),
    ("operating margin (operating income over revenue)", "operating_income", "revenue"),
)


def concept(label: str) -> str | None:
    """The line item a row label names, or None."""
    key = " ".join(re.sub(r"[^a-z0-9'&]+", " ", plain(label).lower().replace("\u2019", "'")).split()).replace("'", "")
    return next((k for k, (_, rx, _) in ITEMS.items() if rx.fullmatch(key)), None)


def candidates(grid: Grid, title: str) -> list[tuple[str, str, str, str, str]]:
    """(line item, row, column, value, fiscal year) of a table that its statement can give (`statement_kind` of its
    title: a flow from the income or cash-flow statement, a balance from the balance sheet; no segment's table), a
    number under a column of one year. No period or unit check: `line_items.items` adds those for a question."""
    kind = statement_kind(title)
    if kind is None or PART_OF_COMPANY.search(title):
        return []
    out = []
    for row, col, value in grid.cells:
        c, years = concept(row), set(YEAR.findall(col))
        if c is not None and quantity(value) is not None and len(years) == 1 and \
                kind in (FLOW_STATEMENTS if ITEMS[c][2] else BALANCE_STATEMENTS):
            out.append((c, row, col, value, years.pop()))
    return out


def page_concepts(page_text: str) -> frozenset[str]:
    """The line items a page prints as a line of its own (its table's rows as text extraction reads them): a row
    the table parser dropped is still there for a reader of the page."""
    return frozenset(c for line in page_text.splitlines() if 3 <= len(line.strip()) <= 80
                     for c in [concept(line)] if c is not None)


def item_keys(text: str, title: str) -> frozenset[tuple[str, str, str]]:
    """(line item, fiscal year, period) of a markdown table's `candidates`: where a line-item question can be. The
    period is a flow's kind as its column or first header cell names it ("3m", "6m", "9m", "12m"; "?" when they do
    not say), "end" for a balance."""
    grid = table_grid(text)
    out = set()
    for c, _, col, _, year in candidates(grid, title):
        period = (period_kind(col, grid.header[0], "") or "?") if ITEMS[c][2] else "end"
        out.add((c, year, period))
    return frozenset(out)


def _same_time(p: str, q: str) -> bool:
    """Two line items' periods that make a ratio: two flows of one kind (or one not stated), or a balance and a flow
    over twelve months."""
    if "end" in (p, q):
        return {p, q} <= {"end", "12m", "?"} and p != q
    return p == q or "?" in (p, q)


def ratio_pair(a: frozenset[tuple[str, str, str]], b: frozenset[tuple[str, str, str]]) -> bool:
    """Two tables' `item_keys` that make a named ratio for one year and period (either way round)."""
    return any(n == kn and d == kd and y == yd and _same_time(p, pd)
               for x, z in ((a, b), (b, a)) for kn, y, p in x for kd, yd, pd in z for _, n, d in RATIOS)


_STATEMENTS = (("comprehensive", re.compile(r"comprehensive (income|loss)", re.I)),
               ("income", re.compile(r"statements? of (consolidated )?(income|operations|earnings)|income statements?",
                                     re.I)),
               ("balance", re.compile(r"balance sheets?|statements? of financial (position|condition)", re.I)),
               ("cash_flows", re.compile(r"cash flows?\b", re.I)),
               ("equity", re.compile(r"(stockholders|shareholders|shareowners)['\u2019]? equity|changes in equity", re.I)),
               ("selected", re.compile(r"selected (consolidated )?financial data", re.I)))


def statement_kind(title: str) -> str | None:
    """Which statement a table's title names (income, balance, cash_flows, equity, comprehensive, selected), or None:
    the same row label in two companies' tables is one line only in the same statement ("Marketing" in a stock-based
    compensation note is not the marketing expense of an income statement)."""
    return next((k for k, rx in _STATEMENTS if rx.search(title)), None)
