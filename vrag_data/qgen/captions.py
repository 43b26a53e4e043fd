"""A table's numbered caption ("Table 3: Accuracy on ...") matched to it by position, in both directions.

A paper prints its captions either above its tables or below them, the same way throughout a page. A caption
between two tables is the one under the first in one layout and the one over the second in the other, so it is
matched only when the page says which: a caption with a table right after it and none right before it heads its
table (captions above); one with a table right before it and none after follows it (captions below). The caption
of a table is then the nearest caption on that side with no other table of the page between them. A page whose
captions say both, or neither while the caption stands between two tables, names its tables by no caption: a
question then uses a neutral reference rather than another table's number.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from vrag_data.qgen.grid import markdown_rows

# "Table 6.5:", "Table A-2.", "Table 3b:", "Table IV." (its text may start on the next line); "Table 6.5" is never
# read as "Table 6" with a text starting "5:"
_CAPTION = re.compile(r"^\s*((?:Table|TABLE)\s+(?:(?:[A-Z]-?)?\d+(?:[.\-]\d+)*[a-z]?|[IVX]+))\s*[:.]\s*(.*)$")
# the end of a caption's first sentence ("... used for BERT."); "mid-Sep. and Nov.", "J. Smith", "et al.", "vs.",
# "cf." or "e.g." ends none
_STOP = re.compile(r"(?<=[A-Za-z0-9)])(?<!\b[A-Z])(?<!\b[A-Z][a-z])(?<!\b[A-Z][a-z]{2})(?<!\bal)(?<!\bvs)(?<!\bcf)"
                   r"(?<!\b[a-z])\.\s")  # "BERT." ends one
CAPTION_WORDS, CAPTION_REACH = 8, 60


def _line(text: str) -> str:
    """A page line or cell as printed, ligatures ("\ufb01") and spacing aside."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def table_span(table_md: str, lines: list[str]) -> tuple[int, int] | None:
    """The page lines a table occupies: from its first header line to the last cell of its last row, or None
    when its first row labels are not lines of the page."""
    rows = markdown_rows(table_md)
    norm = [_line(ln) for ln in lines]
    cells_of = [[_line(c) for c in r if c.strip()] for r in rows]
    # a first row found by all its cells in order (a label alone, "Article", may head another table of the page),
    # else by its label
    at = next((i for r in cells_of[1:4] if len(r) > 1 for i in range(len(norm)) if norm[i:i + len(r)] == r), None)
    if at is None:
        labels = [_line(r[0]) for r in rows[1:4] if r and r[0]]
        at = next((i for lab in labels for i, ln in enumerate(norm) if ln == lab), None)
    if at is None:
        return None
    cells = {_norm(c) for r in rows for c in r if c.strip()} - {""}
    start = at
    while start > 0 and _norm(norm[start - 1]) in cells:  # the header lines printed above the first row
        start -= 1
    last, end = cells_of[-1], at
    for i in range(at, len(norm) - len(last) + 1):  # the last row, all its cells in order
        if last and norm[i:i + len(last)] == last:
            end = i + len(last) - 1
            break
    return start, end


def _side(caps: list[int], spans: list[tuple[int, int]]) -> str:
    """"above" or "below" when the page's captions say how it prints them, else ""."""
    marks = set()
    for c in caps:
        ahead = [s for s, _ in spans if s > c]
        behind = [e for _, e in spans if e < c]
        nxt = min(ahead) if ahead else None
        prv = max(behind) if behind else None
        heads = nxt is not None and nxt - c <= CAPTION_REACH and not any(c < k < nxt for k in caps)
        follows = prv is not None and c - prv <= CAPTION_REACH and not any(prv < k < c for k in caps)
        if heads and not follows:
            marks.add("above")
        elif follows and not heads:
            marks.add("below")
    return marks.pop() if len(marks) == 1 else ""


def _nearest(at: tuple[int, int], caps: list[int], spans: list[tuple[int, int]], side: str) -> int | None:
    """The nearest caption on `side` of the table at `at` with no other table between them."""
    start, end = at
    if side == "above":
        cands = [c for c in caps if c < start and start - c <= CAPTION_REACH
                 and not any(c < s <= start and (s, e) != at for s, e in spans)]
        return max(cands) if cands else None
    cands = [c for c in caps if c > end and c - end <= CAPTION_REACH and not any(end <= e < c and (s, e) != at for s, e in spans)]
    return min(cands) if cands else None


def caption_of(table_md: str, page_text: str, page_tables: Sequence[str] = ()) -> str:
    """The numbered caption of the table: "Table 2 (Results on ...)", or "" when the page does not say which
    caption is its own (module doc)."""
    lines = page_text.splitlines()
    span = table_span(table_md, lines)
    caps = [i for i, ln in enumerate(lines) if _CAPTION.match(ln)]
    if span is None or not caps:
        return ""
    spans = [span, *(sp for md in page_tables if md.strip() != table_md.strip() for sp in [table_span(md, lines)] if sp)]
    side = _side(caps, spans)
    if side:
        at_cap = _nearest(span, caps, spans, side)
    else:  # the page does not say: only a caption on one side, that stands next to no other table
        up, down = _nearest(span, caps, spans, "above"), _nearest(span, caps, spans, "below")
        at_cap = up if down is None else down if up is None else None
        if at_cap is not None and _side([at_cap], spans) == "":
            at_cap = None
    if at_cap is None:
        return ""
    return _caption_text(lines, at_cap, span[0])


def _caption_text(lines: list[str], at_cap: int, start: int) -> str:
    cap = _CAPTION.match(lines[at_cap])
    assert cap is not None
    text = cap.group(2).strip()
    after = lines[at_cap + 1: start if at_cap < start else len(lines)]  # a caption above wraps no further than the table
    if not text:  # "Table 7:" alone, its text on a following line
        first = next((k for k, ln in enumerate(after[:4]) if ln.strip()), None)
        if first is None:
            return ""
        text, after = after[first].strip(), after[first + 1:]
    for nxt in after[:2]:  # a caption wrapped over lines ("... incorrectly-" / "predicted ...")
        if _STOP.search(text + " ") or text.endswith(":") or len(text.split()) >= CAPTION_WORDS or not nxt.strip():
            break
        text = _join(text, nxt.strip(), lines) if re.search(r"[a-z]-$", text) else f"{text} {nxt.strip()}"
    words = text.split()
    first_sentence = _STOP.split(" ".join(words) + " ", maxsplit=1)[0].split()
    text = " ".join(first_sentence[:CAPTION_WORDS]).rstrip(".,;:") + ("..." if len(first_sentence) > CAPTION_WORDS else "")
    number = cap.group(1).split()[-1]
    return f"Table {number} ({text})"


def _join(text: str, nxt: str, lines: list[str]) -> str:
    """A word broken at a line end: "re-" + "sults" is "results" when the page prints that word elsewhere, else a
    compound ("incorrectly-" + "predicted")."""
    head, tail = re.search(r"(\w+)-$", text), re.match(r"\w+", nxt)
    if head and tail and re.search(rf"\b{head.group(1) + tail.group(0)}\b", " ".join(lines), re.I):
        return text[:-1] + nxt
    return text + nxt
