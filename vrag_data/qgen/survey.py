"""Questions a survey's results page answers without sentences or tables: the share of one answer.

A survey export prints each question with its answers and their shares ("Which sector would you assign your
company to?" / "Automotive" / "26.09%"), often beside a chart and with no sentence to blank. The shares are read
off the text as printed, and kept only when the page confirms every name the question uses: a question line ending
in "?" that the document prints once, followed by answers, each one line over its share (an answer wrapped over
two lines is not asked: which words are its label the text does not tell).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_SHARE = re.compile(r"^\d{1,3}(?:\.\d+)?\s?%$")
MAX_OPTION_WORDS = 6
# a follow-up that needs the question before it ("If so, is there a clear strategy ...?", "Why not?")
_FOLLOW_UP = re.compile(r"^(if\s+(so|yes|no|not)\b|why\b|and\b|or\b|(this|that|these|those|it|they)\b)", re.I)


def answer_shares(page_text: str) -> list[tuple[str, str, str]]:
    """(question, answer, share) of each survey answer printed under its question (module doc)."""
    return list(_answer_shares(page_text))


@lru_cache(maxsize=1024)
def _answer_shares(page_text: str) -> tuple[tuple[str, str, str], ...]:  # remembered per page: each region asks
    lines = [ln.strip() for ln in page_text.splitlines() if ln.strip()]
    out: list[tuple[str, str, str]] = []
    for i, line in enumerate(lines):
        if not (line.endswith("?") and 4 <= len(line.split()) <= 30 and line[:1].isupper()) or _FOLLOW_UP.match(line):
            continue
        pending: list[str] = []
        found: list[tuple[str, str]] = []
        for ln in lines[i + 1:]:
            if ln.endswith("?") or len(pending) > 3:
                break
            if not _SHARE.match(ln):
                pending.append(ln)
                continue
            # the first answer may sit under a one-word caption ("Results"); later ones stand alone over their share
            lead = pending[:-1]
            alone = not lead if found else all(len(x.split()) == 1 and not re.search(r"\d", x) for x in lead)
            if pending and alone and len(pending[-1].split()) <= MAX_OPTION_WORDS and re.search(r"[A-Za-z]", pending[-1]):
                found.append((pending[-1], ln))
            pending = []
        names = [a for a, _ in found]
        # an answer printed again above its share (a legend over a chart whose text sets shares first: "34%" /
        # "Detractor" / "52%" / "Passive") leaves which share is whose unknown
        above = lines[i + 1:i + 1 + next((k for k, ln in enumerate(lines[i + 1:]) if _SHARE.match(ln)), 0)]
        if len(found) >= 2 and len(set(names)) == len(names) and not any(a in above[:-1] for a in names):
            out += [(line, a, s) for a, s in found if float(s.rstrip("%").strip()) > 0]
    return tuple(out)


def region_shares(region_text: str, page_text: str) -> list[tuple[str, str, str]]:
    """The page's answer shares whose answer the region prints followed by its share (the region, a text block or
    the survey's chart, shows what the question asks)."""
    flat = f" {' '.join(region_text.split())} "  # a chart's text layer runs its labels together on one line
    return [c for c in _answer_shares(page_text) if f" {c[1]} {c[2]} " in flat]


def share_question(region_text: str, page_text: str, label: str, doc_texts: tuple[str, ...],
                   pick: Callable[[list], object]) -> tuple[str, str] | None:
    """(question, answer) asking what share of respondents gave one answer to a survey question the document
    (`doc_texts`) prints once, or None."""
    cands = [c for c in region_shares(region_text, page_text) if sum(t.count(c[0]) for t in doc_texts) == 1]
    if not cands or not label:
        return None
    question, answer, share = pick(cands)  # type: ignore[misc]
    return (f"In {label}, what share of respondents answered \u201c{answer}\u201d to the question \u201c{question}\u201d?",
            share.replace(" ", ""))
