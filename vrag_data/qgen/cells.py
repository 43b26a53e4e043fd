"""One cell of an extracted table read for questions: whether it is a number (not a year), the amount it states,
and whether a name or a value is clean enough to quote (no fragment a line wrap or a merge left behind)."""

from __future__ import annotations

import re

# thousands groups of three only: "3,5,7" is a list of numbers, not 357
# "1,234", "(16)", "$ 12.5", "-3%", and "$ (16)" (a currency sign printed before the bracket of a negative)
_NUMBER = re.compile(r"(?:[$\u20ac\u00a3]\s*(?=[(\u2212-]))?[-+\u2212(]?\s*[$\u20ac\u00a3]?\s*(\d{1,3}(,\d{3})+|\d+)(\.\d*)?"
                     r"\s*(%|pp|bps|x)?\)?", re.I)
# text that a line wrap cut: it ends in a comma or a word that needs more after it ("Executive Team,", "format and")
CUT = re.compile(r"([,;:&/\u2013-]|\b(and|or|of|the|to|for|with|in|on|by|a|an|from|at|as|than|per))$", re.I)
EMPTY = {"", "-", "\u2013", "\u2014", "n/a", "na", "nm", "*"}


_YEAR = re.compile(r"(FY\s?)?(19|20)\d\d", re.I)


def is_number(cell: str) -> bool:
    return bool(_NUMBER.fullmatch(cell.strip()))


def is_value(cell: str) -> bool:
    """A number that is not a year (a year names a column or a row: "2023")."""
    return is_number(cell) and not _YEAR.fullmatch(cell.strip())


def quantity(cell: str) -> float | None:
    """The number a cell states as an amount to compare: not a year ("approved 2021" is a date, not more than 2020)."""
    return number(cell) if is_value(cell) else None


def number(value: str) -> float | None:
    if not is_number(value):
        return None
    v = re.sub(r"[^\d.]", "", value.replace(",", ""))
    try:
        n = float(v)
    except ValueError:
        return None
    return -n if re.sub(r"^[$\u20ac\u00a3\s]+", "", value.strip()).startswith(("-", "\u2212", "(")) else n


def plain(name: str) -> str:
    """A label or column name without its footnote mark: "Interest payments(5)" -> "Interest payments",
    "Earnings (a)" -> "Earnings", "D. K. Mehrotra**" -> "D. K. Mehrotra", "* Rita" -> "Rita", "GDP(3) Growth" -> "GDP Growth"; a unit stays
    ("Time (s)", "Length (m)": notes are marked (a) to (f) at most)."""
    name = re.sub(r"^[*\u2020\u2021]+\s*(?=\w)", "", name.strip())
    name = re.sub(r"(?<=[A-Za-z])\(\d\)(?=\s)", "", name)  # "GDP(3) Growth": a note mark set right after a word
    return re.sub(r"\s*(\((\d{1,2}|[a-f])\)|[*\u2020\u2021\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+)$", "", name).strip() or name


_SHORT_OK = frozenset("a i of in to at by on or vs no us uk eu fy q1 q2 q3 q4 h1 h2 % & $ # + - ( )".split())


def clean_name(cell: str) -> bool:
    """A column name or row label as a reader would type it: not a number, no fragment left by text extraction
    (a stray letter such as "Three o", a cut word such as "th Ended"), no value glued to its end ("Some college 69")."""
    toks = cell.split()
    if not toks or is_value(cell) or cell.startswith("(") and cell.endswith(")"):
        return False
    if cell.count("(") != cell.count(")"):  # "EPS (Diluted Net EBITDA": two header cells run together
        return False
    if len(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", cell)) >= 2:  # "June 30, 2023 11.5 years 11.3 years": values glued on
        return False
    if not re.search(r"[A-Za-z]{2,}|\d", cell):  # "/S/" (a signature mark), "—"
        return False
    if any(len(t) <= 2 and t.isalpha() and t.lower() not in _SHORT_OK for t in toks):
        return False
    if any(re.fullmatch(r"\w{2,}-", t) for t in toks):  # "World-", "Avg_Clar-": a word cut at a line end
        return False
    if toks[0][0].islower() and len(toks[0]) <= 3 or toks[0] in ("-", "\u2013", "\u2022"):  # "th Ended", "d", "- Self-Ask"
        return False
    if len(toks) > 1 and CUT.search(cell.strip()):  # "Net sales by" or "Shares in": the rest is on the next line
        return False
    if len(toks) > 1 and re.search(r"[$(\[]$", cell.strip()):  # "..., net of tax of $3, $(4), $31, and $": cut
        return False
    if re.match(r"\d{1,2}(?:\.\d{1,2})+\s+[A-Za-z]", cell.strip()):  # "7.00 Loan Received": a numbered note's heading
        return False
    if re.search(r"\b(table|figure|fig\.)\s+[\dIVX]+[.:]", cell, re.I):  # "Table IV. Experiment results. Reliability
        return False  # Ours": the caption read into the header
    return not (len(toks) > 1 and is_number(toks[-1]) and not re.fullmatch(r"(19|20)\d\d", toks[-1]))


def clean_value(cell: str) -> bool:
    c = cell.strip()
    if c.lower() in EMPTY or len(c) > 40 or c.count("(") != c.count(")"):  # "Audit Committee.)": a cut note
        return False
    if not re.search(r"[^\W_]", c):  # a mark ("\u2715", "\u2713"): what it means the question cannot say
        return False
    if not is_number(c) and CUT.search(c):
        return False
    return not re.search(r"%\s*%|\$\s*\$|\s{2,}|\$$", c)  # "29% %", "$ 1,874 $": two cells run together
