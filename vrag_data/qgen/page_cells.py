"""A table cell re-read from its page's own words, not from the grid rebuilt out of them.

The grid behind a question is rebuilt from the page (find_tables, header stacking); when that rebuild glues several
cells into one ("4.2 3.9", "Yes No Yes"), copies a header onto a neighbour or shifts a column, the gold answer is
no cell a reader sees. So each cell a question rests on is looked up again in the page's text layer (its OCR text
for a page without one): its row label on a line, and its value printed whole on one line at or after that label
and before the next text-only line (the next row's label). A value that holds two numbers, or whose words lie on
several lines, spans more than one cell of the page and names no single cell.
"""

from __future__ import annotations

import re

from vrag_data.rewards.answer import normalize_answer

WINDOW = 16  # lines after a row label that may hold its values (one value a line in a block-wise text layer)
_NUM = re.compile(r"\d[\d,]*(\.\d+)?")


def _norm(text: str) -> str:
    return f" {normalize_answer(text)} "


_SPACED = re.compile(r"(?<![\d,.])\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?![\d,.])")  # "1 996 959"
_COMMA_GROUPED = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?!\d)")  # "1,996,959"
SPACED_NUMBERS = 3  # numbers grouped by spaces a page prints, none by commas, before it counts as its style


def spans_cells(value: str, page_text: str = "") -> bool:
    """Two numbers in one value ("1,234 5,678", "$ 12 $ 13"): cells glued by the table rebuild. A number grouped
    by spaces ("(1 996 959)", as South African or French statements print thousands) is one number on a page that
    groups its numbers so (`SPACED_NUMBERS` of them, none grouped by commas)."""
    v = value.replace("\u2212", "-")
    if _SPACED.fullmatch(v.strip().strip("()-$\u20ac\u00a3R ").strip()) and len(_SPACED.findall(page_text)) >= SPACED_NUMBERS \
            and not _COMMA_GROUPED.search(page_text):
        return False
    return len(_NUM.findall(v)) >= 2


def _label_lines(lines: list[str], row: str) -> list[int]:
    """Lines that start the row label: hold it whole, or are its first line of a wrap (two words or more)."""
    want = _norm(row)
    out = []
    for i, ln in enumerate(lines):
        got = _norm(ln)
        if want in got or (len(got.split()) >= 2 and want.startswith(got)):
            out.append(i)
    return out


def _is_label(line: str) -> bool:
    return bool(re.search(r"[A-Za-z]{3,}", line)) and not re.search(r"\d", line)


def reread_on_page(page_text: str, row: str, value: str) -> str:
    """Why the page's words do not show `value` as one cell of row `row` ("" when they do)."""
    if spans_cells(value, page_text):
        return f"{value!r} holds two numbers: several cells of the page glued into one"
    lines = [ln for ln in page_text.splitlines() if ln.strip()]
    hits = _label_lines(lines, row)
    if not hits:
        return f"row label {row!r} is not on the page"
    want = _norm(value)
    for i in hits:
        after = _norm(lines[i]).split(_norm(row).strip(), 1)[-1]
        if want in f" {after} ":
            return ""
        for ln in lines[i + 1: i + 1 + WINDOW]:
            if want in _norm(ln):
                return ""
            if _is_label(ln) and not want.strip().isalpha():
                break
    return f"{value!r} is not printed on one line of row {row!r} on the page"
