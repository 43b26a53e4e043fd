"""The first row of an extracted table: whether it names columns a question can ask under, or a merge, a wrap or a
value read into it broke them ("Balance at December 31 Contributions Received", "Q3 2023 $960M", "Six Months")."""

from __future__ import annotations

import re

from vrag_data.qgen.cells import clean_name, is_value

MAX_HEADER_CHARS = 60

_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b")


def _smeared(cols: list[str]) -> bool:
    """Column names that a header merge garbled: the group label of some columns glued into every name after their
    shared prefix ("... 2022 Rigid Flexibles", "... 2022 Rigid Packaging", ...), or "less/more than" cut from its
    number ("Payments due by Period Less than Total")."""
    if any(re.search(r"\b(less|more) than (?![\d$])", c, re.I) for c in cols):
        return True
    # two sub-columns read as one: "hypermarkets 1996 since 1980" (a "1996" column and a "since 1980" column)
    if any(re.search(r"\b(?:19|20)\d\d\s+(?!to\b|and\b|vs\b|versus\b|through\b)[A-Za-z]+\b.*\b(?:19|20)\d\d\b", c) for c in cols):
        return True
    # a day of the year run into the next column's words: "Balance at December 31 Contributions Received"
    # ("December 31" over "2022" in one column, "Contributions" over "Received" in the next)
    if any(re.search(rf"\b{_MONTH}\.?\s+\d{{1,2}}\s+(?!,|(?:19|20)\d\d\b)[A-Za-z]", c, re.I) for c in cols):
        return True
    groups: dict[str, list[str]] = {}
    for c in cols:
        m = re.match(r"(.*\b(?:19|20)\d\d)\s+(\S.*)$", c)  # a dated group: "<period ending YYYY> <rest>"
        if m:
            groups.setdefault(m.group(1), []).append(m.group(2))
    for rests in groups.values():
        firsts = {r.split()[0] for r in rests if len(r.split()) >= 2}
        if len(rests) >= 3 and len(firsts) == 1 and all(len(r.split()) >= 2 for r in rests):
            return True
    return False


def header_problem(header: list[str]) -> str:
    """Why the first row names no columns a question could use ("" when it does)."""
    cols = [h for h in header[1:] if h]
    if not cols or sum(is_value(h) for h in cols) * 2 >= len(cols):
        return "the first row holds values, not column names"
    if len(set(cols)) < len(cols) or not all(clean_name(h) and len(h) <= MAX_HEADER_CHARS for h in cols):
        return "column names repeated or broken by text extraction"
    words = [frozenset(h.lower().split()) for h in cols]
    if any(i != j and a <= b for i, a in enumerate(words) for j, b in enumerate(words)):  # "Six Months" / "Six Months Ended"
        return "one column name is part of another (a header split by text extraction)"
    if _smeared(cols) or _date_cut(cols):
        return "a group header smeared over its columns, or a column name cut by text extraction"
    if any(re.search(r"@|www\.|https?:", h) for h in cols):  # a contact list's addresses: no column names
        return "contact details in the first row, not column names"
    if any(h.count(",") >= 2 for h in cols):  # "Option, Try, Validated, Either": a row of values read as the header
        return "the first row holds a list of values, not column names"
    if any(_GLUED_VALUE.search(h) or _REPEATED_WORD.search(h) for h in cols):
        return "a value or a repeated word glued to a column name (\"Q3 2023 $960M\", \"Consolidated Consolidated\")"
    return ""


# an amount inside a column name: the first row's value read into the header ("Q3 2023 $960M", "FY22 73%")
_GLUED_VALUE = re.compile(r"[$\u20ac\u00a3]\s?\d|\d[\d,.]*\s?[MBK]\b|\b\d+(\.\d+)?\s?%|\s[$\u20ac\u00a3\u2014\u2013]+(\s[$\u20ac\u00a3\u2014\u2013-]+)*$")
_REPEATED_WORD = re.compile(r"\b(\w{3,})\s+\1\b", re.I)


_MONTH_DAY_YEAR = re.compile(r"\b[A-Z][a-z]{2,8}\.?\s+\d{1,2},?\s+(19|20)\d\d\b")


def _date_cut(cols: list[str]) -> bool:
    """A period column that lost its month and day ("Three Months Ended 2022") beside one that kept them ("Three
    Months Ended December 31, 2021"): which day the first period ends is not known."""
    dated = [c for c in cols if _MONTH_DAY_YEAR.search(c)]
    return bool(dated) and any(re.search(r"\bended\b", c, re.I) and re.search(r"\b(19|20)\d\d\b", c)
                               and not _MONTH_DAY_YEAR.search(c) for c in cols)
