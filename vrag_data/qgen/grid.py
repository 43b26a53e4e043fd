"""Extracted tables read for questions: a markdown table -> named columns, unique readable row labels, clean values.

Only what makes a well-formed question is kept: a table whose first row is data, whose column names text extraction
broke or smeared, that has values under unnamed columns, or whose rows of values mostly lack a label gives nothing;
rows whose label is not readable text, is not unique, or runs on into a column of numbers are dropped (their
values are kept apart: "which row is the highest" must still see them). A column of unit names ("V", "mA", "ms")
gives each row its unit. `cell_at` re-reads a value at (row, column).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from vrag_data.qgen.cells import EMPTY, clean_name, clean_value, is_number, is_value, plain
from vrag_data.qgen.grid_header import header_problem

_UNIT_CELL = re.compile(r"[A-Za-z\u00b5\u03bc\u00b0%/]{1,5}")  # "V", "mA", "MHz", "ms", "\u00b5s", "%"
_SHARE_COUNT = re.compile(r"\b(weighted[- ]average (number of )?(common )?shares|shares outstanding|number of shares)\b", re.I)
_PER_SHARE = re.compile(r"\bper\s+(\w+\s+){0,2}share\b|\beps\b", re.I)
_SHARE_COLUMN = re.compile(r"(\b(rate|rates|percent|percentage|yield|margin)\b|%)", re.I)  # a column of shares
MAX_LABEL_CHARS, MAX_COLUMNS_NAMED, MAX_HEAD_WORDS = 80, 4, 12


@dataclass(frozen=True)
class Grid:
    """A markdown table read for questions: named columns and rows with a unique, non-numeric label."""

    header: list[str]
    cells: list[tuple[str, str, str]]  # (row label, column name, value as printed)
    problem: str = ""  # why the table gives no question (empty when it does)
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # cells of rows not asked about
    units: dict[str, str] = field(default_factory=dict)  # row label -> its cell in a column of unit names
    heads: dict[str, str] = field(default_factory=dict)  # row label -> the label-only row above it, as printed

    @cached_property
    def sections(self) -> dict[str, str]:
        """`heads` normalised: two tables' rows are one line only under the same section."""
        return {r: section_key(h) for r, h in self.heads.items()}

    def unit(self, value: str, row: str, col: str = "") -> str:
        """What a cell counts: `unit` refined by its column's name (a "Rate" column holds shares printed without
        "%"), by its section ("Basic" under "Earnings per share" is a per-share figure) and by the row's own unit
        cell (45 ms and 90 \u00b5s are no pair)."""
        base = "share" if _SHARE_COLUMN.search(col) else unit(value, f"{self.heads.get(row, '')} {row}".strip())
        if base == "plain" and col in self.percent_columns:  # "100.0 %" atop a column of bare numbers
            base = "share"
        own = self.units.get(row, "")
        return f"{base}:{own.lower()}" if own else base

    @cached_property
    def percent_columns(self) -> frozenset[str]:
        """Columns of shares that print "%" on some rows only (a statement "as a percentage of revenue": "100.0 %",
        then 43.1, 56.9, ...): the first value of the column carries it, no value carries "$"."""
        first: dict[str, str] = {}
        for _, c, v in self.cells:
            first.setdefault(c, v)
        dollars = {c for _, c, v in self.cells if "$" in v}
        return frozenset(c for c, v in first.items() if "%" in v and c not in dollars)  # it opens with its "%"

    def row_phrase(self, row: str) -> str:
        """A row as a question names it: its footnote mark dropped ("Interest payments(5)"), a short label with the
        section it sits under ("Basic (under Earnings per share)", "Cash (under Current assets)"): "Basic" alone
        names no line a reader can find."""
        head = self.heads.get(row, "")
        return f"{plain(row)} (under {plain(head)})" if head and len(row.split()) <= 2 else plain(row)


    def columns_phrase(self) -> str:
        named = [h for h in self.header[1:] if h]
        more = f" and {len(named) - MAX_COLUMNS_NAMED} more" if len(named) > MAX_COLUMNS_NAMED else ""
        return ", ".join(named[:MAX_COLUMNS_NAMED]) + more


def _unlabelled(body: list[list[str]]) -> bool:
    """Most rows holding numbers have no row label: the table lays out records (a product, its period, region and
    commentary), not one row per item, and a label found there names a fragment ("Business" of two lines)."""
    with_values = [r for r in body if any(is_number(c) for c in r[1:])]
    return len(with_values) >= 2 and 2 * sum(not r[0] for r in with_values) >= len(with_values)


# labels that name a kind of line, not one line: the "Total" of two tables are two different totals
_GENERIC = frozenset({"total", "totals", "subtotal", "grand total", "total amount", "other", "others", "net", "all",
                      "sum", "overall", "balance", "amount", "average", "mean", "consolidated", "combined"})


def generic_label(label: str) -> bool:
    return " ".join(re.sub(r"[^a-z]+", " ", label.lower()).split()) in _GENERIC


def label_key(label: str) -> str:
    """A row label as a reader tells labels apart: "income / (loss)" and "Income/(Loss)" are one label."""
    return re.sub(r"[^a-z0-9]+", "", label.lower())


_ENDSCUT = re.compile(r"\b(and|or|of|in|the|to|for|with|by|from|at|on)$", re.I)  # a label going on below


def _wrapped(body: list[list[str]]) -> bool:
    """Text cells wrapped over several lines, each line read as a row ("Listing existing" / "domain names"): at
    least two rows, and a fifth of them, go on from the line above (the label starts with a lower-case word, the
    label above ends in a hyphen or a word that needs more, the row has no label but text in a cell, or a text
    cell starts with a lower-case word: "| Aerospace Workers (IAM) | | and one in July 2025. |")."""
    goes_on, prev = 0, ""
    for r in body:
        lab = r[0]
        texts = [c for c in r[1:] if c and c.lower() not in EMPTY and not is_number(c)]
        cut_above = bool(re.search(r"[A-Za-z]-$", prev)) or (" " in prev and bool(_ENDSCUT.search(prev)))
        goes_on += (bool(re.match(r"[a-z]+\b", lab)) or cut_above or (not lab and bool(texts))
                    or any(re.match(r"[a-z]+\s+\S", c) for c in texts))  # "and one in ...", not "mA"
        prev = lab or prev
    return goes_on >= 2 and goes_on * 5 >= len(body)


_DASH = re.compile(r"\$?\s*[\u2014\u2013-]+")


def _heads(body: list[list[str]]) -> dict[str, str]:
    """Each row label's section as printed: the nearest label-only row above it ("Provisions for credit losses"
    over "Card Member receivables", its trailing colon dropped) up to the total that closes it ("Total current
    assets"); rows before any, or after that total, have none."""
    out: dict[str, str] = {}
    section = ""
    for r in body:
        # a label with no values under it; a dash is a value (a zero line: "Preferred stock | — | —")
        if r[0] and not any(c and (c.lower() not in EMPTY or _DASH.fullmatch(c.strip())) for c in r[1:]):
            head = r[0].strip().rstrip(":").strip()
            # a heading, not a long label whose values sit on the next line ("Preferred stock, $1.00 par value: ...")
            # ... nor the lower-case rest of the label above ("Deferred" / "memberships")
            section = head if len(head.split()) <= MAX_HEAD_WORDS and not re.search(r"\d|:", head) \
                and not _FRAGMENT.match(head) and head.count("(") == head.count(")") else ""
        elif r[0] and section:
            out.setdefault(r[0], section)
            if r[0].lower().startswith("total"):  # "Total current assets" closes "Current assets"
                section = ""
    return out


def section_key(head: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", head.lower()).split())


def unit_column(header: list[str], body: list[list[str]]) -> int | None:
    """The column that names each row's unit ("Units": V, mA, ms), when there is one: it is named so, or holds
    only short unit words, at least two different ones."""
    for j in range(1, len(header)):
        vals = [r[j] for r in body if r[j] and r[j].lower() not in EMPTY]
        if len(vals) >= 2 and all(_UNIT_CELL.fullmatch(v) for v in vals) and (
                "unit" in header[j].lower() or len({v.lower() for v in vals}) >= 2):
            return j
    return None


def markdown_rows(text: str) -> list[list[str]]:
    """The rows of a markdown table (header first), cells stripped; the `|---|` rule left out."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.strip().startswith("|") and not re.fullmatch(r"[|\-:\s]+", line.strip())]


# a row label that begins with a plain lower-case word is the rest of a wrapped text cell ("persons with
# disabilities through GSA procurement."); "iPhone" or "eBay" begin otherwise
_FRAGMENT = re.compile(r"[a-z]{4,}\b")


def _spanning(rows: list[list[str]]) -> set[str]:
    """Labels whose record goes on in the next row: that row has no label but text values ("Increase customer
    satisfaction. | Target" over " | Actual"); which of the two values is the label's is not known. (A row of
    numbers without a label under a group is its subtotal, not the rest of a record.)"""
    out = set()
    for r, nxt in zip(rows, rows[1:]):
        if r[0] and not nxt[0] and any(c and c.lower() not in EMPTY and not _DASH.fullmatch(c)
                                       and not is_value(c.replace("$", "").strip()) for c in nxt[1:]) and \
                any(c and c.lower() not in EMPTY for c in r[1:]):
            out.add(r[0])
    return out


_TOKEN = re.compile(r"[A-Za-z_][\w.\-]*")


def _item_grid(header: list[str], body: list[list[str]]) -> bool:
    """Boxes of names laid out in a grid ("sys_linkat | sys_symlink | sys_rename"): every cell one identifier, the
    first row's alike, no number anywhere; "the sys_linkat value of sys_symlink" asks nothing."""
    cells = [c for c in header[1:] if c] + [c for r in body for c in r[1:] if c and c.lower() not in EMPTY]
    return len(cells) >= 4 and all(_TOKEN.fullmatch(c) and ("_" in c or "." in c) for c in cells)


def _value_kind(value: str) -> str:
    v = value.strip()
    if re.search(r"%\)?$", v):
        return "share"
    if re.search(r"[A-Za-z]{3}", v) or re.fullmatch(r"\d{1,2}/\d{1,2}/\d{2,4}|(?:19|20)\d\d", v):
        return "date or text"
    return "number"


def _odd_kind(cells: list[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Cells unlike the rest of their column (a rate under "Maturity" where every other cell is a date): the
    extractor moved a value into an empty cell beside it, so the row's cell there is not the printed one."""
    out = set()
    for col in {c for _, c, _ in cells}:
        column = [cell for cell in cells if cell[1] == col]
        kinds = Counter(_value_kind(v) for _, _, v in column)
        top, n = kinds.most_common(1)[0]
        if len(column) >= 3 and n * 5 >= 4 * len(column):
            out |= {cell for cell in column if _value_kind(cell[2]) != top}
    return out


# a label that starts with a word joining it to the line above ("BEFORE INCOME TAXES" under "INCOME/(LOSS) FROM
# CONTINUING OPERATIONS"): the rest of a wrapped label, whatever its case
_GOES_ON = re.compile(r"^(before|after|of|for|and|or|from|to|in|on|by|with|at|per|than|into)\b", re.I)


def _cut_above(rows: list[list[str]]) -> set[str]:
    """Labels that are the second line of a label-only row cut short above them ("Interest expense on borrowings on
    Condensed Consolidated" over "Statements of Income | 1,204"): the values belong to the two lines together."""
    out = set()
    for r, nxt in zip(rows, rows[1:]):
        label_only = r[0] and not any(c and c.lower() not in EMPTY for c in r[1:])
        if label_only and nxt[0] and (_ENDSCUT.search(r[0].strip()) or re.search(r"[A-Za-z]-$", r[0].strip())
                                      or len(r[0].split()) > 5 and not r[0].rstrip().endswith(":")):  # a long
            out.add(nxt[0])  # label, not a heading: "which line", the table does not tell
    return out


def _continued(rows: list[list[str]]) -> set[str]:
    """Labels that may go on in the next row: a row of values followed by a row with a label and no values
    ("Adjusted FIFO Operating | $989" over "Profit (Table 7) |"). That row is the label's second line or the heading
    of the rows below; which, the table does not tell, so the label above is not asked about (a total, or a
    heading that ends in a colon, is no wrapped label)."""
    out = set()
    for r, nxt in zip(rows, rows[1:]):
        label_only = nxt[0] and not any(c and c.lower() not in EMPTY for c in nxt[1:])
        if label_only and not nxt[0].rstrip().endswith(":") and any(c and c.lower() not in EMPTY for c in r[1:]) \
                and not r[0].lower().startswith("total"):
            out.add(r[0])
    return out


@lru_cache(maxsize=8192)
def table_grid(text: str) -> Grid:
    """Parse a markdown table and keep only what makes a well-formed question: every column named, once, by a
    readable name (a table whose first row is data, or whose names text extraction broke, has nothing to ask by),
    rows whose label is readable text and unique, and cells with a clean value. Remembered per text: the same table
    is read by the picker, the writer and the verifier, and a Grid is never changed."""
    rows = markdown_rows(text)
    if len(rows) < 2 or len(rows[0]) < 2:
        return Grid([], [], "fewer than 2 rows or 2 columns")
    header = rows[0]
    problem = header_problem(header)
    if problem:
        return Grid(header, [], problem)
    body = [r for r in rows[1:] if len(r) == len(header)]
    if any(not header[j] and r[j] and r[j] not in EMPTY for r in body for j in range(1, len(header))):
        return Grid(header, [], "values under unnamed columns (a range or a note split over cells)")
    if _item_grid(header, body):
        return Grid(header, [], "a grid of items (names in every cell, the first row too), not rows and columns")
    if _unlabelled(body):
        return Grid(header, [], "most rows of values have no row label (records laid out, not one row per item)")
    if _wrapped(body):
        return Grid(header, [], "text cells wrapped over several lines (row labels are fragments of one cell)")
    # a text cell in a column of numbers is the rest of a row label ("Comparable Constant Currency | Growth % | (4)")
    numeric = {j for j in range(1, len(header))
               if sum(is_number(r[j]) for r in body) * 5 >= 3 * max(1, sum(bool(r[j]) and r[j] not in EMPTY for r in body))}
    whole = body
    body = [r for r in body if not any(r[j] and r[j].lower() not in EMPTY and not is_number(r[j]) for j in numeric)]
    labels = Counter(label_key(r[0]) for r in body)  # labels equal but for case or spacing name no single row
    spans = _spanning(whole) | _continued(whole) | _cut_above(whole) | {r[0] for r in whole if _GOES_ON.match(r[0])}
    asked = [r for r in body if labels[label_key(r[0])] == 1 and clean_name(r[0]) and len(r[0]) <= MAX_LABEL_CHARS
             and not _FRAGMENT.match(r[0]) and r[0] not in spans]
    cells = [(r[0], header[j], r[j]) for r in asked
             for j in range(1, len(header)) if header[j] and clean_value(r[j]) and r[j] != r[0] and r[j] != header[j]]
    moved = _odd_kind(cells)
    cells = [c for c in cells if c not in moved]
    if not cells:
        return Grid(header, [], "no row with a unique readable label and a value under a named column")
    dropped = [(r[0], header[j], r[j]) for r in whole if r not in asked
               for j in range(1, len(header)) if header[j] and r[j] and r[j].lower() not in EMPTY]
    uj = unit_column(header, body)
    units = {r[0]: r[uj] for r in asked if r[uj]} if uj is not None else {}
    return Grid(header, cells, "", dropped, units, _heads(whole))


def cell_at(text: str, row: str, col: str) -> str | None:
    """The value at (row label, column name) of a markdown table, read again from the region's text; None when that
    row or column is missing or not unique (then the pair names no single cell)."""
    grid = table_grid(text)
    hits = [v for r, c, v in grid.cells if r == row and c == col]
    return hits[0] if len(hits) == 1 else None


def unit(value: str, label: str) -> str:
    """What a number counts, roughly: rows are compared only within one unit."""
    v, lab = value.lower(), label.lower()
    rate = lab.rstrip(" ()%").endswith("rate")  # "tax rate", not "effect of exchange rate changes"
    if "%" in v or "percent" in v:
        return "share"
    if _SHARE_COUNT.search(lab) and not _PER_SHARE.search(lab.split(" used in ")[0]):
        return "shares"  # "Basic" under "Weighted-average shares used in computation of earnings per share"
    if "$" in v:  # the value's own sign wins: "Federal income tax at the statutory rate | $ 425" is an amount
        return "per-share" if _PER_SHARE.search(lab) else "$"
    if "%" in lab or "percent" in lab or "margin" in lab or rate:
        return "share"
    if _PER_SHARE.search(lab):  # "per share", "per common share", "Diluted EPS": not an amount in millions
        return "per-share"
    return "$" if "$" in v else "plain"
