"""Text questions for documents without tables: the one number of a printed sentence, asked as a blank.

A manual, a press release, a methodology statement or a protocol holds few tables the offline writer can read, but
its sentences state figures ("The survey was conducted among 2,010 adults."). A sentence is used when a reader can
find it and the blank has one answer: a whole sentence of 8 to 30 words, starting with a capital and ending with a
period, that holds exactly one number (no year, no section, table, figure or form number, no number of a name
("Executive Order 13788"), no citation or parenthesis, no word broken at a line end, no pronoun at its start that
needs the sentence before), in words that read as text (no glued
columns). The question quotes it with the number blanked; its answer is the number as printed.
"""

from __future__ import annotations

import random
import re
import unicodedata

MIN_WORDS, MAX_WORDS = 8, 30
_SENTENCE_END = re.compile(r"(?<=[a-z0-9%)][.!?])\s+(?=[A-Z])")
_NUMBER = re.compile(r"^(\$?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)([.,;:]?)$")
_YEAR = re.compile(r"^(?:1[5-9]|20)\d\d$")
_NAMED_BY = frozenset("section sections table tables figure figures form item part chapter no appendix page pages eq "
                      "equation step article rule title version level grade phase wave class schedule line lines "
                      "exhibit note notes fig figs ref refs".split())
_NEEDS_CONTEXT = frozenset("this these that those it its they their them he she his her here there such both each "
                           "also however then thus".split())
_WORD = re.compile(r"^[A-Za-z][A-Za-z'\u2019\-]*[.,;:]?$")


def _sentences(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"([a-z])-\n([a-z])", r"\1\2", text)  # a word broken at a line end
    return [" ".join(s.split()) for s in _SENTENCE_END.split(" ".join(text.split("\n")))]


def _blank(sentence: str) -> tuple[str, str] | None:
    """(the sentence with its number blanked, the number as printed), or None when the sentence is no fit."""
    words = sentence.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or not words[0][:1].isupper() or not sentence.endswith("."):
        return None
    if re.search(r"[()\[\]{}<>|@/\\=+*#_\u2022]|https?:|www\.|et al|e\.g\.|i\.e\.|[a-z]- [a-z]", sentence, re.I):
        return None
    if words[0].lower().strip(",") in _NEEDS_CONTEXT:
        return None
    digits = [i for i, w in enumerate(words) if re.search(r"\d", w)]
    if len(digits) != 1:
        return None
    i = digits[0]
    m = _NUMBER.match(words[i])
    if not m or _YEAR.match(m.group(2)) and not m.group(3):
        return None
    if i > 0 and words[i - 1].lower().strip(".,;:") in _NAMED_BY:  # "Section 4", "Form 1040": a name, not a figure
        return None
    if i > 1 and words[i - 1][:1].isupper():  # "Executive Order 13788", "COVID 19": part of a name
        return None
    others = [w for k, w in enumerate(words) if k != i]
    if sum(bool(_WORD.match(w)) for w in others) < 0.9 * len(others):  # glued cells, symbols: not running text
        return None
    value = f"{m.group(2)}{m.group(3) or ''}"
    words[i] = f"{m.group(1)}___{m.group(4)}{m.group(5)}"
    return " ".join(words), value


def cloze_candidates(text: str) -> list[tuple[str, str]]:
    """Every usable (blanked sentence, number) of a text region (module doc)."""
    return [b for s in _sentences(text) for b in [_blank(s)] if b]


def cloze_question(rng: random.Random, text: str, label: str) -> tuple[str, str] | None:
    """(question, answer) for one sentence of the region naming its document, or None."""
    cands = cloze_candidates(text)
    if not cands or not label:
        return None
    blanked, value = rng.choice(cands)
    return f"In {label}, what number fills the blank in the sentence \u201c{blanked}\u201d?", value
