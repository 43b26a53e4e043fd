"""Text questions for documents whose sentences state no number: a name or term of a printed sentence, blanked.

A manual page, a protocol, a licence or an accident report may state no figure a blank can ask for, yet its
sentences name things: "... the student pilot slipped the Piper PA-28-140 in order to lose altitude ...". A term is
used when it is a name a reader can check on the page and no guess: an acronym or code ("NTSB", "BM25", "TF-IDF",
"PA-28-140"), or a run of two to five capitalised words ("Independent Safety Board Act", "Department of
Education") inside a sentence of running text (`cloze.running_words`), never its first word, never a word that
names a table, figure or section ("Table 3"), a month, a day or a Roman numeral, never the tail of a name the
sentence starts with ("Kim YH. Anterior ...", a reference), never a term the sentence prints twice. The question quotes the sentence with the term blanked; its answer is the term as printed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from vrag_data.qgen.cloze import _NAMED_BY, pick_blank, prose, quotable, running_words, sentences

_ACRONYM = re.compile(r"^(?=(?:[^A-Z]*[A-Z]){2})[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*$")  # two capitals at least
_CAPITAL = re.compile(r"^[A-Z][a-z]+(?:-[A-Za-z]+)*$")
_ROMAN = re.compile(r"^[IVXLC]+$")
# words inside one name ("Bank of Canada", "Henk van Elst"; not "on": "Ingress on AWS" is a phrase); "and" joins two names as often ("Elst and Thomas
# Buchert"), so a run beside "and" and another name is not blanked (`_beside_another`)
_JOINERS = frozenset({"of", "for", "de", "van", "von", "der", "den", "da", "di", "du", "del", "la", "le"})
_AND = frozenset({"and", "&"})
_CALENDAR = frozenset("january february march april may june july august september october november december "
                      "monday tuesday wednesday thursday friday saturday sunday".split())
# capitalised values and connectives, not names ("True", "AKA")
_VALUES = frozenset("true false yes no none null nan aka fyi etc vs nb ps ok faq".split())
MAX_TERM_WORDS = 5
_TRAIL = ".,;:"


def _named(token: str) -> bool:
    """A word of a name: an acronym or code, or a capitalised word that is no month or day."""
    if _ROMAN.match(token) or token.lower() in _CALENDAR or token.lower() in _NAMED_BY or token.lower() in _VALUES:
        return False
    return bool(_ACRONYM.match(token) or _CAPITAL.match(token))


def _runs(words: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each run of name words after the first word; a joiner ("of") only between two name words;
    punctuation only after a run's last word."""
    out: list[tuple[int, int]] = []
    i = 1
    while i < len(words):
        if not _named(words[i].rstrip(_TRAIL)) or words[i - 1].endswith(":"):
            i += 1
            continue
        j = i
        while j + 1 < len(words) and words[j] == words[j].rstrip(_TRAIL):
            nxt = words[j + 1].rstrip(_TRAIL)
            if _named(nxt):
                j += 1
            elif nxt in _JOINERS and j + 2 < len(words) and words[j + 1] == nxt and _named(words[j + 2].rstrip(_TRAIL)):
                j += 2
            else:
                break
        out.append((i, j + 1))
        i = j + 1
    return out


def _given_away(term: list[str], rest: list[str]) -> bool:
    """Whether the rest of the sentence gives the term away: a word sharing its first five letters ("DCTEncode"
    beside "DCTDecode", "lowerCaseNames"), or its short form spelled out ("General Services Administration" for
    "GSA")."""
    stem = " ".join(term).lower()[:5]
    if len(stem) == 5 and any(w.lower().strip("()\u201c\u201d\"'.,;:").startswith(stem) for w in rest):
        return True
    if len(term) > 1 and any(w.strip("()\u201c\u201d\"'.,;:") == term[-1] for w in rest):
        return True  # "the Left Spine and the Right Spine": its sibling name gives it away
    if len(term) == 1 and _ACRONYM.match(term[0]) and term[0].isupper():
        initials = "".join(w[0] for w in rest if w[:1].isupper())
        return term[0].replace("-", "") in initials
    return False


_ALTERNATIVE = frozenset({"or", "and", "vs", "vs.", "versus", "nor"})


def _one_of_a_pair(words: list[str], a: int, b: int) -> bool:
    """Whether a one-word term stands in a pair with another short form ("DNA or ___", "___ and DC"): the reader
    fills the blank with the pair's usual other half."""
    if b - a != 1 or not _ACRONYM.match(words[a].rstrip(_TRAIL)):
        return False
    before = a >= 2 and words[a - 1].lower() in _ALTERNATIVE and bool(_ACRONYM.match(words[a - 2].rstrip(_TRAIL)))
    after = b + 1 < len(words) and words[b].lower() in _ALTERNATIVE and bool(_ACRONYM.match(words[b + 1].rstrip(_TRAIL)))
    return before or after


def _beside_another(words: list[str], a: int, b: int) -> bool:
    """Whether the run `words[a:b]` stands by "and" next to another name: one name of a list, or part of a longer
    one ("Society for Testing and Materials"); which words the blank holds, the sentence does not tell."""
    after = b + 1 < len(words) and words[b].lower() in _AND and _named(words[b + 1].rstrip(_TRAIL)) \
        and words[b - 1] == words[b - 1].rstrip(_TRAIL)
    before = a >= 2 and words[a - 1].lower() in _AND and _named(words[a - 2].rstrip(_TRAIL)) \
        and words[a - 2] == words[a - 2].rstrip(_TRAIL)
    return after or before


def _blanks(sentence: str) -> list[tuple[str, str]]:
    words = running_words(sentence)
    if not words or sum(w[:1].isupper() for w in words) * 2 > len(words):  # a title-case line, no prose
        return []
    out = []
    for a, b in _runs(words):
        if a == 1 and _named(words[0].rstrip(_TRAIL)):  # "Kim YH. Anterior ...": a name begun by the first word
            continue
        if words[a - 1][:1].isupper() or b < len(words) and words[b][:1].isupper():  # "___ Aid's": part of a name
            continue
        if _beside_another(words, a, b) or _one_of_a_pair(words, a, b):
            continue
        term = " ".join(words[a:b]).rstrip(_TRAIL)
        core = [w.rstrip(_TRAIL) for w in words[a:b]]
        if len(core) > MAX_TERM_WORDS or (len(core) == 1 and not _ACRONYM.match(core[0])):
            continue  # one capitalised word ("English", "Congress") is a guess away; an acronym is a name
        if b < len(words) and re.match(r"^\(?\d", words[b]):  # "Section 4", "Form 1040": a label, not the name
            continue
        if b < len(words) and words[b].startswith("("):  # "___ (IRB)": the short form beside it gives it away
            continue
        if sentence.count(term) != 1 or not prose(words, set(range(a, b))):
            continue
        if re.search(r"[a-z]\d+$", core[-1]):  # "Ball-Tree13": a footnote mark glued to the name
            continue
        if _given_away(core, words[:a] + words[b:]):
            continue
        tail = words[b - 1][len(words[b - 1].rstrip(_TRAIL)):]
        blanked = [*words[:a], f"___{tail}", *words[b:]]
        out.append((" ".join(blanked), term))
    return out


def term_candidates(text: str, common: frozenset[str] = frozenset(), margin: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Every usable (sentence with a term blanked, the term) of a text region (module doc) from the sentences it
    may quote (`cloze.quotable`)."""
    return [b for s in sentences(text) if quotable(s, common, margin) for b in _blanks(s)]


def term_question(rng: random.Random, text: str, label: str, common: frozenset[str] = frozenset(),
                  guessable: Callable[[str], bool] = lambda term: False,
                  margin: frozenset[str] = frozenset(),
                  fits: Callable[[str, str], bool] | None = None) -> tuple[str, str] | None:
    """(question, answer) for one sentence of the region naming its document, a name or term blanked: never one
    the document's name spells, one the caller finds guessable (printed all over the document, or printed in lower
    case as well: an ordinary word set in capitals, `TextScope.plain`), or a word set in capitals for emphasis
    ("ONLY", "NEXT": the region prints it in lower case too)."""
    words = set(re.findall(r"\b[a-z]+\b", text))
    terms = [t for t in term_candidates(text, common, margin) if t[1].lower() not in label.lower() and not guessable(t[1])
             and not (t[1].isalpha() and t[1].isupper() and t[1].lower() in words)]
    got = pick_blank(rng, terms, fits) if label else None
    if got is None:
        return None
    blanked, value = got
    return f"In {label}, what name or term fills the blank in the sentence \u201c{blanked}\u201d?", value
