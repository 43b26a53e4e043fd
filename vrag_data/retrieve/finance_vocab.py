"""Financial vocabulary: which statement pages hold the inputs of a metric, for query expansion and page fields.

Most questions on a 10-K ask for a metric that no page prints (inventory turnover, ROA, interest coverage):
the evidence is the statements that hold its inputs. The table below maps

    metric (how questions name it) -> line items (how statements print its inputs) -> statements

and is applied at query time: a query naming a metric gets the line items and the statement names appended.
The statement names are also page-level index fields: a page whose first lines carry a statement title
("CONSOLIDATED BALANCE SHEETS") is tagged with the statement's canonical name, so "balance sheet" finds the
balance sheet and not the forty notes that mention one.

To extend: add a `Metric` (patterns are case-insensitive regular expressions matched on whole words; line items
are the words statements print; statements are keys of `STATEMENTS`). Pure data and pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# canonical name -> title patterns (case-insensitive) that start a statement page
STATEMENTS: dict[str, tuple[str, ...]] = {
    "income statement": (r"statements? of (?:consolidated )?(?:operations|income|earnings)",
                         r"income statements?", r"profit and loss (?:statement|account)",
                         r"statements? of profit or loss"),
    "balance sheet": (r"balance sheets?", r"statements? of (?:consolidated )?financial (?:position|condition)"),
    "cash flow statement": (r"statements? of (?:consolidated )?cash flows?", r"cash flow statements?"),
    "equity statement": (r"statements? of (?:consolidated )?(?:changes in )?(?:stockholders|shareholders)['’]? "
                         r"(?:equity|deficit)", r"statements? of (?:changes in )?equity"),
    "comprehensive income statement": (r"statements? of (?:consolidated )?comprehensive (?:income|loss)",),
}

IS, BS, CF, EQ = "income statement", "balance sheet", "cash flow statement", "equity statement"


@dataclass(frozen=True)
class Metric:
    name: str
    patterns: tuple[str, ...]
    line_items: tuple[str, ...]
    statements: tuple[str, ...]


METRICS: tuple[Metric, ...] = (
    Metric("inventory turnover", (r"inventory turnover", r"days? (?:of )?inventory", r"dio"),
           ("cost of sales", "inventories"), (IS, BS)),
    Metric("days payable outstanding", (r"days? payables?(?: outstanding)?", r"dpo", r"payables? turnover"),
           ("accounts payable", "cost of sales"), (IS, BS)),
    Metric("days sales outstanding", (r"days? sales outstanding", r"dso", r"receivables? turnover"),
           ("accounts receivable", "net sales revenue"), (IS, BS)),
    Metric("cash conversion cycle", (r"cash conversion cycle",),
           ("inventories", "accounts receivable", "accounts payable", "cost of sales"), (IS, BS)),
    Metric("interest coverage", (r"interest coverage", r"times interest earned", r"interest expense to"),
           ("operating income", "interest expense"), (IS,)),
    Metric("quick ratio", (r"quick ratio", r"acid[- ]test"),
           ("cash and cash equivalents", "marketable securities", "accounts receivable", "total current liabilities"),
           (BS,)),
    Metric("current ratio", (r"current ratio",), ("total current assets", "total current liabilities"), (BS,)),
    Metric("working capital", (r"working capital",), ("total current assets", "total current liabilities"), (BS,)),
    Metric("return on assets", (r"return on (?:average )?(?:total )?assets?", r"roa"),
           ("net income", "total assets"), (IS, BS)),
    Metric("return on equity", (r"return on (?:average )?(?:common |shareholders['’]? |stockholders['’]? )?equity",
                                r"roe"), ("net income", "total stockholders equity"), (IS, BS)),
    Metric("return on capital", (r"return on (?:invested |capital employed|capital)", r"roic", r"roce"),
           ("operating income", "total assets", "total current liabilities"), (IS, BS)),
    Metric("capital expenditure", (r"capital expenditures?", r"capex", r"capital spending"),
           ("purchases of property, plant and equipment", "property and equipment additions"), (CF,)),
    Metric("free cash flow", (r"free cash flows?", r"fcf"),
           ("net cash provided by operating activities", "purchases of property and equipment"), (CF,)),
    Metric("operating cash flow", (r"operating cash flows?", r"cash flows? from operations",
                                   r"cash from operations"), ("net cash provided by operating activities",), (CF,)),
    Metric("ebitda", (r"ebitda", r"operating profit (?:margin )?before depreciation"),
           ("operating income", "depreciation and amortization"), (IS, CF)),
    Metric("gross margin", (r"gross (?:profit )?margins?", r"gross profit"),
           ("gross profit", "net sales revenue", "cost of sales"), (IS,)),
    Metric("operating margin", (r"operating (?:profit )?margins?", r"operating income margin"),
           ("operating income", "net sales revenue"), (IS,)),
    Metric("net margin", (r"net (?:profit |income )?margins?", r"profit margin"),
           ("net income", "net sales revenue"), (IS,)),
    Metric("effective tax rate", (r"effective (?:income )?tax rate", r"tax rate"),
           ("provision for income taxes", "income before income taxes"), (IS,)),
    Metric("debt ratios", (r"debt[- ]to[- ]\w+", r"total debt", r"leverage ratio", r"capitalization ratio",
                           r"long[- ]term debt", r"debt ratio"),
           ("long-term debt", "current portion of long-term debt", "total stockholders equity"), (BS,)),
    Metric("liabilities", (r"total liabilities", r"current liabilities", r"long[- ]term liabilities"),
           ("total liabilities", "total current liabilities"), (BS,)),
    Metric("equity", (r"common equity", r"shareholders['’]? equity", r"stockholders['’]? equity", r"book value"),
           ("total stockholders equity",), (BS, EQ)),
    Metric("total assets", (r"total assets", r"asset turnover", r"fixed asset turnover"),
           ("total assets", "net sales revenue", "property and equipment, net"), (BS, IS)),
    Metric("dividend payout", (r"dividend payout", r"payout ratio", r"dividends? paid", r"retention ratio"),
           ("cash dividends declared", "net income"), (CF, EQ)),
    Metric("share repurchases", (r"repurchas\w*", r"buybacks?"), ("repurchases of common stock",), (CF, EQ)),
    Metric("accruals", (r"accru\w*",), ("accrued expenses and other current liabilities",), (BS,)),
    Metric("depreciation", (r"depreciation", r"amortization", r"d&a"),
           ("depreciation and amortization",), (CF,)),
    Metric("earnings per share", (r"eps", r"earnings per share"),
           ("basic earnings per share", "diluted earnings per share"), (IS,)),
    Metric("revenue growth", (r"revenue growth", r"sales growth", r"growth in (?:net )?(?:sales|revenue)"),
           ("net sales revenue",), (IS,)),
    Metric("cash", (r"cash balance", r"cash and cash equivalents", r"cash ratio"),
           ("cash and cash equivalents",), (BS, CF)),
)

_COMPILED = [(m, re.compile(r"(?<![\w&])(?:" + "|".join(m.patterns) + r")(?![\w&])", re.IGNORECASE))
             for m in METRICS]
_STATEMENT_RES = {name: re.compile(r"\b(?:" + "|".join(p) + r")\b", re.IGNORECASE) for name, p in STATEMENTS.items()}


def metrics_in(query: str) -> list[Metric]:
    return [m for m, rx in _COMPILED if rx.search(query)]


def expand_metrics(query: str) -> str:
    """Line items and statement names of every metric the query names, not already in it; "" when none."""
    low = query.lower()
    words: list[str] = []
    for m in metrics_in(query):
        for w in (*m.line_items, *m.statements):
            if w.lower() not in low and w not in words:
                words.append(w)
    return " ".join(words)


def _title_line(line: str, start: int, end: int) -> bool:
    """A title line is mostly the title, after at most a few capitalised words ("CONSOLIDATED BALANCE SHEETS",
    "ACME Corp. Consolidated Statements of Cash Flows (in millions)"), not a sentence that mentions one
    ("The balance sheet date is ...", "in millions; see the balance sheet.")."""
    before = line[:start].split()
    return (len(before) <= 4 and all(w[:1].isupper() or not w[:1].isalpha() for w in before)
            and len(line) - (end - start) <= 50 and not line.rstrip().endswith("."))


def statement_titles(text: str, head_lines: int = 6) -> list[str]:
    """Canonical names of the statements whose title opens this page (first `head_lines` non-empty lines).
    More than two titles there is a table of contents or an index of statements, not a statement: none."""
    found: list[str] = []
    for line in [ln.strip() for ln in text.splitlines() if ln.strip()][:head_lines]:
        for name, rx in _STATEMENT_RES.items():
            m = rx.search(line)
            if m and name not in found and _title_line(line, m.start(), m.end()):
                found.append(name)
    return found if len(found) <= 2 else []


def statements_named(query: str) -> list[str]:
    """Canonical statement names that a (possibly expanded) query mentions."""
    low = query.lower()
    return [name for name in STATEMENTS if name in low or _STATEMENT_RES[name].search(query)]
