"""How a question names a table: by what it measures, as a reader of the document finds it.

In order: a paper's numbered caption near the table ("Table 3: Accuracy on ..." -> "Table 3 (Accuracy on ...)"),
the title printed right above it ("Consolidated Statements of Cash Flows", "Reconciliation of net debt"), or the
lead-in sentence that introduces it ("Other information related to our leases was as follows:" -> "the table of
other information related to our leases"); with the scale its amounts are stated in. A line that is one of the
table's own cells (a column header printed above the rows: "Contract Type"), a running page header ("Notes to
Condensed Consolidated Financial Statements") or a signature is no title. A table with none of these is named by
its column names, and the question writer may refuse it (`named_by_columns`): a list of column headers ("MAY 31,
2021, MAY 31, 2020") names no table a person would ask about.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from vrag_data.qgen.captions import caption_of
from vrag_data.qgen.grid import Grid, generic_label, markdown_rows, section_key
from vrag_data.qgen.periods import period_kinds
from vrag_data.qgen.scale import WORDS, table_scale, zone_above

_TITLE_WORDS = re.compile(r"[A-Za-z][A-Za-z'\u2019&,\u2013\u2014-]*|[&\u2013\u2014-]")
# ("SG&A"), (EPS): a short form, two capitals at least; "(Expense)" in "Other Income (Expense), Net" is part of the title
_ACRONYM = re.compile(r"\s*\(\s*[\"\u201c]?(?=(?:[^)]*?[A-Z]){2})[A-Z][A-Za-z&]{1,7}[\"\u201d]?\s*\)")
_RUNNING = re.compile(r"^(notes? to (the )?(condensed )?(consolidated )?financial statements|table of contents|"
                      r"index to financial statements|part [ivx]+\b.*|item \d+[a-z]?\b.*|"
                      r".+\band\s+(its\s+)?(consolidated\s+)?subsidiaries)$", re.I)  # "Acme Corp and Subsidiaries"
_NOTE_AT_END = re.compile(r"\s*\([^()]*\)\s*(?=:?$)")  # "(in years):", "($ in millions):"
_LEAD_IN = re.compile(
    r"^(?:the\s+(?:following\s+tables?|tables?\s+below)\s+(?:presents?|summari[sz]es?|sets?\s+forth|shows?|provides?|reflects?|details?|"
    r"lists?|includes?|reconciles?)\s+(?P<a>.+?)|(?P<b>.+?)\s+(?:(?:is|are|was|were)\s+)?(?:(?:summari[sz]ed|"
    r"presented|shown|detailed|set\s+forth|included|reconciled)\s+)?(?:as\s+follows|below|in\s+the\s+following\s+table))"
    r"\s*[:.]?$|^(?P<c>.+?)\s+(?:includes?|included|consists?\s+of|consisted\s+of|comprises?|comprised)\s+the\s+following"
    r"(?:\s+\w+)?\s*[:.]?$", re.I)
_PERIOD_TAIL = re.compile(r"\s+(?:for|during|in|over)\s+(?:the\s+|each\s+of\s+the\s+)?(?:(?:three|six|nine|twelve)\s+months|"
                          r"(?:fiscal\s+)?(?:years?|quarters?|periods?))\b.*$|\s+as\s+of\s+.*$", re.I)
# words a Title Case heading prints in lower case ("Information about our Executive Officers")
_SMALL_WORDS = frozenset("about above after among before between during from into over through under upon with within "
                         "without their your".split())
_ONE_WORD = re.compile(r"[A-Z][a-z]{4,}")
_GENERIC_WORDS = frozenset("total totals notes amount amounts description balance balances other table contents index "
                           "page summary assets liabilities unaudited continued overview introduction background general "
                           "results highlights".split())
_UNIT_LINE = re.compile(r"\(?[^()]{0,40}\b(millions?|thousands?|billions?|unaudited)\b[^()]{0,40}\)?", re.I)
_SECTION = re.compile(r"^(note|item)\s+\d+[a-z]?\b", re.I)  # a note's or an item's heading starts another section
MAX_TITLE_WORDS, MAX_LEAD_IN_WORDS = 10, 14
MAX_PROSE_LINES = 1  # a definition line may stand between a title and its table ("Free cash flow is ...")
ZONE_LINES = 32  # page lines above a table searched for its title (a stacked header prints a date a line)


def _line(text: str) -> str:
    """A page line or cell as printed, ligatures ("\ufb01") and spacing aside."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _cells(table_md: str) -> set[str]:
    """Every cell of the table, normalised, and each header cell's words in order (a stacked header prints
    "Notional Amount" on a line above "January 28, 2023")."""
    rows = markdown_rows(table_md)
    return {_norm(c) for r in rows for c in r if c.strip()}


def _top_cells(table_md: str) -> set[str]:
    """The cells that can print above a table's first row label: its header rows and its first two rows (the
    search for a title starts above one of its first three labels). A title that only repeats a label further
    down ("Free Cash Flow" over a table whose fifth row is "Free cash flow") is still its title."""
    rows = markdown_rows(table_md)
    top = rows[:3] + [r for r in rows[3:6] if not any(re.search(r"\d", c) for c in r[1:])]  # a header of more rows
    return {_norm(c) for r in top for c in r if c.strip()}


def _own_cell(line: str, cells: set[str]) -> bool:
    n = _norm(line)
    return bool(n) and any(n == c or f" {n} " in f" {c} " for c in cells)


def _title_line(line: str, alone: bool, starts_block: bool = False) -> str:
    """`line` as a title, or "": 2-10 words, no digits or sentence punctuation; Title Case, or a sentence-case
    line printed as a block of its own ("Reconciliation of net debt")."""
    line = _ACRONYM.sub("", line).strip()
    # a title wrapped before its period ("Details of Remuneration of the Directors for the" / "financial year ended
    # ..."): the words that lead into the next line are dropped
    line = re.sub(r"(\s+(for|of|and|the|in|to|by|from|at|on|with|during))+$", "", line, flags=re.I)
    words = line.split()
    if not 2 <= len(words) <= MAX_TITLE_WORDS or re.search(r"\d|[.:;(\"]", line):
        return ""
    if not all(_TITLE_WORDS.fullmatch(w) for w in words) or not words[0][0].isupper() or line.endswith(","):
        return ""
    if _RUNNING.match(line) or period_kinds(line) or re.search(r"\bended\b|^total\b", line, re.I):
        return ""
    # a heading that starts its block may print its small words in lower case
    small = _SMALL_WORDS if starts_block else frozenset()
    title_case = all(w[0].isupper() for w in words if len(w) >= 4 and w[0].isalpha() and w not in small)
    if not (title_case or alone):
        return ""
    return " ".join((w.capitalize() if len(w) > 3 else w.lower()) if line.isupper() else w for w in words)


def _lead_in(zone: list[str], i: int) -> str:
    """The subject of the sentence ending at zone line `i` with a colon ("X were as follows:" -> "X"), or ""."""
    parts = [zone[i]]
    for line in zone[i + 1: i + 4]:  # the lines above it, while the sentence goes on
        if not line or line.rstrip().endswith((".", ":")):
            break
        parts.insert(0, line)
    sentence = _NOTE_AT_END.sub("", " ".join(" ".join(parts).split())).strip()
    m = _LEAD_IN.match(sentence.rstrip(":").strip())
    if not m:
        return ""
    if not sentence[:1].isupper():  # the sentence began on a line further up: its subject is not all here
        return ""
    if re.search(r"\btables\b", sentence, re.I):  # "The following tables show ...": it introduces more than this one
        return ""
    subject = re.sub(r"^(the|our|a)\s+", "", (m.group("a") or m.group("b") or m.group("c")).strip(" ,;"), flags=re.I)
    if re.match(r"(as|of|for|in|on|at|by|to|from|with|during)\b", subject, re.I):  # "as of September 27": no subject
        return ""
    # a clause, not a noun phrase: "Our statements of income include stock-based compensation, net of ..."
    if re.search(r"\b(is|are|was|were|has|have|had|will|would|computed|using)\b", subject, re.I) or \
            re.search(r"\b(includes?|consists?|reflects?|shows?|presents?)\b", subject.split(",")[0], re.I) or \
            re.search(r"\b(and|or|of|the|to|for|with|by)$", subject, re.I):  # a clause, or a subject cut off
        return ""
    if len(subject.split()) > MAX_LEAD_IN_WORDS:  # the columns say the period: "... for the three months ended ..."
        subject = _PERIOD_TAIL.sub("", subject)
    if len(subject.split()) > MAX_LEAD_IN_WORDS:
        subject = subject.split(",")[0]
    if not 2 <= len(subject.split()) <= MAX_LEAD_IN_WORDS or re.search(r"\b(we|us|this)\b", subject, re.I):
        return ""
    first = subject.split()[0]
    # "Company's revenues" -> "company's revenues"; "U.S. and foreign components" keeps its capitals
    return subject[0].lower() + subject[1:] if first[:2].istitle() and not re.search(r"[A-Z.]", first[1:]) else subject


def _prose(line: str) -> bool:
    """A line of running text: a sentence's end after four words or more, or twelve words or more."""
    words = line.split()
    return len(words) >= 12 or (len(words) >= 4 and line.rstrip().endswith(".") and not line.rstrip().endswith(":"))


def table_title(zone: list[str], cells: set[str] | None = None, others: Sequence[set[str]] = ()) -> str:
    """The name printed right above a table (nearest first), or "": a title line, or "table of <subject>" from a
    lead-in sentence ending in a colon; lines that are the table's own cells (`cells`, normalised) are skipped; a
    note's heading ("Note 4 :") ends the search (a title above it is another section's)."""
    cells, passed, prose = cells or set(), False, 0
    for i, raw in enumerate(zone):
        line = raw.strip()
        if _SECTION.match(line):  # another section's heading
            break
        if not line or _own_cell(line, cells):
            continue
        above = _norm(zone[i + 1]) if i + 1 < len(zone) else ""
        if any(_norm(line) in o and above in o for o in others):  # two rows of another table: a title above is its
            break
        over = zone[i + 1].strip() if i + 1 < len(zone) else ""
        if over.endswith(":") and len(over.split()) <= 4:  # "Board Listed:" over "Main Board": a field's value
            continue
        if line.endswith(":"):
            subject = _lead_in(zone, i)
            if subject:
                return f"table of {subject}"
            continue
        prose += _prose(line)
        if prose > MAX_PROSE_LINES:  # a paragraph between a heading and the table: the section's or page's heading
            break
        starts_block = i + 1 >= len(zone) or not zone[i + 1].strip()
        alone = (i == 0 or not zone[i - 1].strip()) and starts_block
        title = _title_line(line, alone, starts_block)
        if title:
            return title
        prose_above = next((z.strip() for z in zone[i + 1:] if z.strip()), "").endswith(".")
        if not passed and _ONE_WORD.fullmatch(line) and line.lower() not in _GENERIC_WORDS and prose_above:
            return line  # a one-word heading right above the table, after a paragraph ("Inventories")
        if not _UNIT_LINE.fullmatch(line):
            passed = True  # text between the table and a line above it: a single word there is no heading of it
    return ""


def table_name(table_md: str, page_text: str, page_tables: Sequence[str] = ()) -> str:
    """What a table is called on its page: its numbered caption, else its title or lead-in, else "". The search for
    a title stops at two lines that are cells of another table of the page (`page_tables`, markdown): the rows of
    the table printed above this one. Pure, and asked for the same table many times in a run (pairing, writing,
    verifying), so remembered."""
    return _table_name(table_md, page_text, tuple(page_tables))


@lru_cache(maxsize=8192)
def _table_name(table_md: str, page_text: str, page_tables: tuple[str, ...]) -> str:
    others = [_cells(md) - {""} for md in page_tables if md.strip() != table_md.strip()]
    return caption_of(table_md, page_text, page_tables) or table_title(zone_above(table_md, page_text, ZONE_LINES), _top_cells(table_md),
                                                          others)


_LEADING_THE = re.compile(r"^the\s+", re.I)


def describe(grid: Grid, label: str, title: str, scale: float | None) -> str:
    """The phrase a question names a table by: its caption, title or subject and unit, else its columns; then its
    document."""
    unit = f" (in {WORDS[scale]})" if scale in WORDS else ""
    doc = f" in {label}" if label else ""
    if title.startswith("Table "):
        return f"{title}{unit}{doc}"
    if title.startswith("table of "):
        return f"the {title}{unit}{doc}"
    if title:
        title = _LEADING_THE.sub("", title)  # "THE COMPANY" is no "the the Company table"
        return f"the {title} table{unit}{doc}"
    return f"the table with the columns {grid.columns_phrase()}{doc}"


def named_by_columns(where: str) -> bool:
    return where.startswith("the table with the columns ")


def region_where(table_md: str, page_text: str, grid: Grid, label: str, page_tables: Sequence[str] = (),
                 running: frozenset[str] = frozenset()) -> str:
    """`describe` for a table region read from its page; a name that is one of the document's running lines (a
    header or footer printed on page after page: "THE COMPANY", "CITY OF VANCOUVER") names no table."""
    title = table_name(table_md, page_text, page_tables)
    if title and not title.startswith("Table ") and section_key(title) in running:
        title = ""
    return describe(grid, label, title, table_scale(table_md, page_text))


_NUMBERED = re.compile(r"^\s*(?:Table|TABLE)\s+((?:[A-Z]-?)?\d+(?:[.\-]\d+)*[a-z]?|[IVXL]+)\s*[:.]", re.M)  # a caption's start


def position_reference(table_md: str, page_text: str, page_no: int, page_tables: Sequence[str], label: str) -> str:
    """A neutral, true reference to a table that has no name of its own: "the table on PDF page 8 of <doc>" (the
    file's page: "PDF page 13 (printed as page 10)" when the page prints its own number), and on a page with
    several tables the one that lists a row label no other line of the page prints ("the table listing “Discount
    rate” on PDF page 14 of <doc>"): an ordinal ("the second table") is wrong as soon as the extractor misses a
    table above it. "" when its place cannot be told (a table not among the page's, no row label of its own, a
    document without a name)."""
    if not label:
        return ""
    tables = list(dict.fromkeys(md.strip() for md in page_tables if md.strip()))
    if table_md.strip() not in tables:
        return ""
    printed = printed_page_number(page_text, page_no)
    page = f"PDF page {page_no}" + (f" (printed as page {printed})" if printed and printed != str(page_no) else "")
    if len(tables) == 1 and len(set(_NUMBERED.findall(page_text))) <= 1:
        return f"the table on {page} of {label}"
    anchor = _own_row_label(table_md, page_text)
    return f"the table listing \u201c{anchor}\u201d on {page} of {label}" if anchor else ""


def _own_row_label(table_md: str, page_text: str) -> str:
    """The first row label of a table that the page prints on one line only, and as that line's start: a reader
    finds the table by it whatever else the page holds."""
    lines = [ln.strip() for ln in page_text.splitlines() if ln.strip()]
    for cells in markdown_rows(table_md)[1:]:
        row = cells[0].strip() if cells else ""
        if not (4 <= len(row) <= 60 and re.search(r"[A-Za-z]{3}", row)) or not any(c.strip() for c in cells[1:]):
            continue
        if generic_label(row):  # "Total" tells no table apart, even where the page prints it once
            continue
        if sum(ln.startswith(row) for ln in lines) == 1 and sum(row in ln for ln in lines) == 1:
            return row
    return ""


_PAGE_WORD = re.compile(r"\bpage\s+(\d{1,4})\b", re.I)
NEAR = 20  # a printed number this close to the file's page number: front matter numbered apart, not a cell


def printed_page_number(page_text: str, page_no: int) -> str:
    """The number a page prints as its own, "" when none is sure: "Page 8" in one of its first or last three
    short lines, or a number alone on its first or last line within `NEAR` of `page_no` (a table's last value
    printed last is no page number). A reference "page 13" counts the file's pages; a reader going by printed
    numbers needs both. (Retrieval's `page_labels` reads more loosely: a boost there, a claim here.)"""
    lines = [ln.strip() for ln in page_text.splitlines() if ln.strip()]
    if not lines:
        return ""
    for ln in (*lines[:3], *lines[-3:]):
        m = _PAGE_WORD.search(ln)
        if m and len(ln.split()) <= 8:
            return m.group(1)
    for ln in (lines[0], lines[-1]):
        if re.fullmatch(r"\d{1,4}", ln) and abs(int(ln) - page_no) <= NEAR:
            return ln
    return ""


_CONTENTS_HEAD = re.compile(r"^\s*(table of contents|contents|index)\s*$", re.I)
_LEADER = re.compile(r"\.{4,}\s*\d+\s*$")


def contents_page(page_text: str) -> bool:
    """A contents or index page: "CONTENTS" / "INDEX" as a line among its first eight, or three lines or more
    with dot leaders to a page number. Its table lists page numbers, no amounts."""
    lines = [ln for ln in page_text.splitlines() if ln.strip()]
    return any(_CONTENTS_HEAD.match(ln) for ln in lines[:8]) or sum(bool(_LEADER.search(ln)) for ln in lines) >= 3
