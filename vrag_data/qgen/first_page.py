"""What page 1's type says about a document: the lines set in its largest font (a title), and its top line that can
head it (for a neutral reference when nothing is set as a title). Page 1 is read once per file version.

The text read here is document text: callers treat it as untrusted (`docname.clean_text` cuts it and strips control
characters).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from vrag_data.qgen.docname import COMPANY_LINE, clean_text, generic_title, neutral_reference


_Line = list[tuple[float, str, tuple[float, float, float, float]]]  # (size, text, bbox) of each span


def _page_lines(page) -> list[_Line]:  # noqa: ANN001 - a PyMuPDF page
    """Page 1's horizontal lines as spans, a span printed twice at one place (a shadow, a bold overprint) once:
    an arXiv stamp runs up the margin in a large font, and overprinted titles read "The The Limes Limes"."""
    kept: list[tuple[float, float, float, float]] = []
    lines: list[_Line] = []
    if page.rotation:  # a landscape page stored turned: its lines run up the stored page (the file is not saved)
        page.remove_rotation()
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            if abs(line["dir"][1]) >= 0.01:
                continue
            spans = []
            for sp in line["spans"]:
                box = tuple(sp["bbox"])
                if sp["text"].strip() and any(_overlap(box, k) > 0.5 for k in kept):
                    continue
                kept.append(box)
                spans.append((round(sp["size"], 1), sp["text"], box))
            lines.append(spans)
    return lines


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """The share of the smaller box that the two boxes have in common."""
    w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    small = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / small if w > 0 and h > 0 and small > 0 else 0.0


_FIELD = re.compile(r"^[A-Z][A-Za-z ]{1,30}:(\s|$)")


TOP_SHARE = 0.8  # a first page's title stands above its footer
NEAR_TOP = 0.9  # a line this close to the largest size, printed above it, is the title
DISTINCT = 1.15  # a title is set at least this much larger than the page's running text ...
RUNNING_TEXT = 400  # ... when the page has running text (characters in its most common size; a cover has little)


def _body_size(lines: list[_Line]) -> tuple[float, int]:
    """The size most of the page's characters are set in, and how many are set in it."""
    chars: Counter[float] = Counter()
    for spans in lines:
        for size, text, _ in spans:
            chars[size] += len(text.strip())
    return chars.most_common(1)[0] if chars else (0.0, 0)


def _title_lines(lines: list[_Line], height: float = 0.0) -> list[str]:
    """Whole lines holding a span of the largest size in the page's upper part (a small-caps title sets only its
    initials that large), up to a cover's first field ("Principal Investigator: Gao Lei"), and a cover's
    over-title: the line just above the first of them, at least 0.7 of that size and aligned with it ("Object
    Storage Service" over "Product Introduction"). None when nothing there is set larger than the running text
    (a transcript, a statement: its first line is no title)."""
    upper = [spans for spans in lines if spans and (not height or spans[0][2][1] < TOP_SHARE * height)]
    # a small-caps title sets its initials alone in the largest size; a drop cap ("C" opening a paragraph) stands
    # on a line of its own
    sizes = [size for spans in upper for size, text, _ in spans
             if re.search(r"[A-Za-z]{3,}", text) or re.fullmatch(r"[A-Z]", text.strip()) and len(spans) > 1]
    body, chars = _body_size(lines)
    if not sizes or (chars >= RUNNING_TEXT and max(sizes) < DISTINCT * body):
        return []
    top = max(sizes)
    # the topmost line set nearly as large is the title, not a box's heading further down set a point larger
    # ("American Funds Global Insight Fund" at 11 pt over "Fund Information" at 12 pt)
    near = [(spans[0][2][1], max(sz for sz, t, _ in spans if sz >= NEAR_TOP * top and re.search(r"[A-Za-z]{3,}", t)))
            for spans in upper if any(sz >= NEAR_TOP * top and re.search(r"[A-Za-z]{3,}", t) for sz, t, _ in spans)
            and not generic_title("".join(t for _, t, _ in spans))]  # not an "Exhibit 99.1" over the title
    if near and not (chars >= RUNNING_TEXT and min(near)[1] < DISTINCT * body):
        top = min(near)[1]
    if chars >= RUNNING_TEXT:  # a title stands above the running text, not under it (a signature stamp's name)
        below = [b[1] for spans in lines for size, text, b in spans if abs(size - body) <= 0.5 and text.strip()]
        first_top = min(spans[0][2][1] for spans in upper if any(abs(size - top) <= 0.5 for size, _, _ in spans))
        if sum(y > first_top for y in below) * 2 < len(below):
            return []
    idx: list[int] = []
    for i, spans in enumerate(lines):
        if spans in upper and any(abs(size - top) <= 0.5 for size, _, _ in spans):
            if idx and (_FIELD.match("".join(t for _, t, _ in spans).strip()) or _apart(lines[idx[-1]], spans)):
                break  # a cover's field, or a heading further down ("Older versions" under "Frequently Asked ...")
            idx.append(i)
    if not idx:
        return []
    picked = ["".join(text for _, text, _ in lines[i]) for i in idx]
    above = [spans for spans in lines[:idx[0]] if spans and "".join(t for _, t, _ in spans).strip()]
    if above:
        first, prev = lines[idx[0]][0][2], above[-1]
        size, box = max(sp[0] for sp in prev), prev[0][2]
        text = "".join(t for _, t, _ in prev).strip()
        if size >= 0.7 * top and abs(box[0] - first[0]) < 2 and 0 <= first[1] - box[3] < 1.5 * (first[3] - first[1]) \
                and not _FIELD.match(text) and not text.endswith(".") and not text[:1].islower():  # a field, prose
            picked.insert(0, "".join(t for _, t, _ in prev))
    return picked


def _apart(above: _Line, below: _Line) -> bool:
    """Whether `below` is no next line of `above`: beside it, above it, or more than one and a half of its line
    heights under it."""
    top_a, bottom_a = min(b[1] for _, _, b in above), max(b[3] for _, _, b in above)
    top_b, bottom_b = min(b[1] for _, _, b in below), max(b[3] for _, _, b in below)
    left_a, right_a = min(b[0] for _, _, b in above), max(b[2] for _, _, b in above)
    left_b, right_b = min(b[0] for _, _, b in below), max(b[2] for _, _, b in below)
    height = bottom_b - top_b
    gap = max(left_b - right_a, left_a - right_b)
    if abs(top_b - top_a) < 0.5 * height and gap >= 0:  # side by side: the headings of two columns ("... Changes
        return gap > 2 * height  # in Equity" beside another statement), not one line set in pieces (small caps)
    return not -height <= top_b - bottom_a <= 1.5 * height


def _first_line_company(lines: list[_Line]) -> str:
    """A company printed alone on page 1's first line ("Apple Inc." over its statements), else ""."""
    first = next(("".join(t for _, t, _ in spans).strip() for spans in lines if "".join(t for _, t, _ in spans).strip()), "")
    m = COMPANY_LINE.match(first)
    return m.group(1) if m else ""


def _first_page(pdf_path: str) -> tuple[list[_Line], float] | None:
    """Page 1's lines (`_page_lines`) and height of a local PDF, None when it is not a readable local PDF (a moved
    source: the other clues still apply). Read once per file version: the title and the top line both need it."""
    from pathlib import Path

    path = Path(pdf_path)
    if not path.is_file():
        return None
    stat = path.stat()
    return _read_first_page(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read_first_page(pdf_path: str, mtime_ns: int, size: int) -> tuple[list[_Line], float] | None:  # noqa: ARG001
    from vrag_data.ingest.render import import_pymupdf

    pymupdf = import_pymupdf(layout=False)
    try:
        with pymupdf.open(pdf_path) as doc:
            if doc.page_count == 0:
                return None
            return _page_lines(doc[0]), doc[0].rect.height
    except (RuntimeError, ValueError):
        return None


def largest_font_text(pdf_path: str) -> str:
    """The text set in the largest font on a local PDF's first page (lines of that size, in reading order);
    "" when the file is not a readable local PDF."""
    page = _first_page(pdf_path)
    if page is None:
        return ""
    lines, height = page
    return clean_text("\n".join(t.strip() for t in _title_lines(lines, height)) or _first_line_company(lines))


HEADING_LINES = 5  # the top lines of page 1 a heading is looked for in


def first_heading(pdf_path: str) -> str:
    """The top line of a local PDF's first page that can head it (a lecture's "MATH 3100 FALL 2020", set like its
    body): what a neutral reference quotes when nothing there is set as a title. A line above it that heads nothing
    is passed over (a contents link, a telephone number and a web address, a date line), and so is one that is no
    heading (a salutation "Fellow shareholders,", a field's label "Summary:", a sentence); "" when none of the top
    `HEADING_LINES` lines can, or the file is not readable."""
    page = _first_page(pdf_path)
    lines = page[0] if page else []
    texts = sorted((spans[0][2][1], "".join(t for _, t, _ in spans).strip()) for spans in lines if spans)
    top = [t for _, t in texts if t][:HEADING_LINES]
    # a heading starts as one (a capital or a number) and ends as one: not a column's first line that goes on
    # from the page before ("(or why they cannot imagine such a thing) and which input")
    return next((t for t in top if re.search(r"[A-Za-z]{3,}", t) and re.match(r"[A-Z0-9]", t)
                 and not re.search(r"\b(and|or|of|the|to|for|with|in|on|by|a|an|that|which)$", t, re.I)
                 and not re.search(r"[,;.]$", t) and not (t.endswith(":") and len(t.split()) <= 2)
                 and neutral_reference(t)), "")
