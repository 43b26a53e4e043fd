"""Text questions for documents without tables: a number of a printed sentence, asked as a blank.

A manual, a press release, a methodology statement or a protocol holds few tables the offline writer can read, but
its sentences state figures ("The survey was conducted among 2,010 adults."). A sentence is used when a reader can
find it and the blank has one answer: a whole sentence of 8 to 30 words that starts with a capital, ends with a
period, reads as text (no glued columns, citations or numbered parentheses, no pronoun at its start that needs the
sentence before; a word broken at a line end is rejoined) and holds one to three numbers. The blanked number is no year and no
number of a name ("Section 4", "Form 1040", "Executive Order 13788"). The question quotes the sentence with the
number blanked; its answer is the number as printed.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

MIN_WORDS, MAX_WORDS, MAX_NUMBERS = 8, 30, 3
_SENTENCE_END = re.compile(r"(?<=[a-z0-9%)][.!?])\s+(?=[A-Z])")
_NUMBER = re.compile(r"^(\$?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)([.,;:]?)$")
_YEAR = re.compile(r"^(?:1[5-9]|20)\d\d$")
_NAMED_BY = frozenset("section sections table tables figure figures form item part chapter no appendix page pages eq "
                      "equation step article rule title version level grade phase wave class schedule line lines "
                      "exhibit note notes fig figs ref refs".split())
_NEEDS_CONTEXT = frozenset("this these that those it its they their them he she his her here there such both each "
                           "also however then thus".split())
# English function words a sentence of running text holds two of at least (none is a common word of German, Dutch or
# the Nordic languages)
_ENGLISH = frozenset("the of and to is are was were for with by that this as at from be or not which has have it its "
                     "their can will we our these than on a after been had who when they he she his you your if but "
                     "more into".split())
_WORD = re.compile(r"^[A-Za-z][A-Za-z'\u2019\-]*[.,;:]?$")


def _mend(m: re.Match[str], words: frozenset[str] = frozenset()) -> str:
    """A word broken at a line end ("imple- mented"), rejoined; a compound keeps its hyphen ("state-of-the- art",
    "low- and middle-income"), and so does a pair of words the text prints apart ("second- highest": "second" and
    "highest" are words of the text, "imple" is none), as the page prints it."""
    head, tail = m.group(1), m.group(2)
    if tail in ("and", "or", "to") or m.group(3):  # "low- and middle-income"; "year- over-year" keeps its hyphen
        return re.sub(r"-\s+", "-", m.group(0)) if m.group(3) else m.group(0)
    last = head.rsplit("-", 1)[-1].lower()
    if "-" in head or (last in words and tail.lower() in words and (head + tail).lower() not in words):
        return f"{head}-{tail}"
    return head + tail


def sentences(text: str) -> list[str]:
    """The sentences of a text, words broken at line ends rejoined, margin numbers left out (as the blanks read them)."""
    text = unicodedata.normalize("NFKC", text)
    # a line holding a number alone inside running text is a form's line number, a margin or page number
    text = "\n".join(ln for ln in text.split("\n") if not re.fullmatch(r"\s*\d{1,4}\s*", ln))
    # the words the text prints whole ("StyleGAN2" holds "stylegan"), not the halves of the words it breaks
    vocab = frozenset(w.lower() for w in re.findall(r"[A-Za-z]+", re.sub(r"[\w-]*-\s*\n\s*\w+", " ", text)))
    text = re.sub(r"([\w-]*[a-z])-\s+([a-z]+)(?=(-?))", lambda m: _mend(m, vocab), text)  # broken at a line end
    # a hyphen the text layer kept inside a word it broke ("fig-ures", "publica-tion"): the word the text prints
    # whole elsewhere, unless the text prints the hyphenated form again
    hyphened = Counter(m.group(0).lower() for m in re.finditer(r"\b[A-Za-z]+-[a-z]+\b", text))
    text = re.sub(r"\b([A-Za-z]+)-([a-z]+)\b", lambda m: m.group(1) + m.group(2)
                  if (m.group(1) + m.group(2)).lower() in vocab and hyphened[m.group(0).lower()] == 1 else m.group(0), text)
    out: list[str] = []
    for piece in _SENTENCE_END.split(" ".join(text.split("\n"))):
        if out and _ABBREVIATION.search(out[-1]):  # "The Party Wall etc. Act 1996 ...": one sentence
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [" ".join(s.split()) for s in out]


# a period that ends an abbreviation, not a sentence
_ABBREVIATION = re.compile(r"\b(etc|vs|approx|incl|Mr|Mrs|Ms|Dr|Prof|No|Nos|Inc|Ltd|Co|Corp|St|Fig|Eq|Sec|Vol|cf|al)\.$")
_GARBLED = re.compile(r"[a-z]{2,}\d{1,2}\b|\b[A-Za-z]+\d+\.\d+\b|(?<![\d\s])%|\b[a-z]{3,}[A-Z][a-z]+|\^|\u2010|"
                      r"\b[A-Za-z]+(?:ffi|ffl|fi|fl) [a-z]{2,}\b|\b[Il]\d+\b|[\u00d7x]\s*10\d")  # "\u00d7 109": 10 to the 9


# what reads as a sentence but states nothing of the document's own: a labelled field or a dataset's example
# ("Text: The most ...", "... till stop: 4 Achieved ..."), a link's title ("Wikipedia - Must know ..."), speech
# broken off ("At least -- the market was ..."), numbered headings run together ("... fields 1.1 Definitions"), a
# trademark or copyright notice, a note on a screenshot
_NO_STATEMENT = re.compile(r"^[A-Z][\w ]{0,20}:\s|:\s+[\d.]+\s+[A-Z]|^(?:\S+\s+){0,3}-\s|\s--\s|(?-i:\.\s+[a-z])|\b\d+(?:\.\d+)+\s+(?-i:[A-Z][a-z])|trademark|all rights reserved|"
                           r"copyright|\u00a9|licensed under", re.I)
_OPEN_ENDS = frozenset("and or but nor the for with from into onto that which who than their its our your".split())
# a finite verb: an auxiliary or a past form ("was administered"); a plural noun ("emission rates") is none
_VERB = re.compile(r"^(is|are|was|were|has|have|had|will|can|could|would|should|may|must|does|do|did|[a-z]{3,}ed)$")


def _statement(words: list[str]) -> bool:
    """A block's last line without a period that still states something (a slide's "The survey was administered in 6
    languages"): a verb among its lower-case words, and no more than 60 % of its words capitalised (a menu's
    "Polish Sausage 6.00 Polish with Cheese 7.00" states nothing)."""
    if sum(w[:1].isupper() for w in words) > 0.6 * len(words) or not re.fullmatch(r"[A-Za-z]{3,}\)?|[\d,.]+%?", words[-1]) \
            or words[-1].lower() in _OPEN_ENDS:  # "... with focus on nanotechnology and": the line goes on
        return False  # a line cut mid-word ("... or if total L"), a question, a list running on
    return any(_VERB.match(w.strip(",;:")) for w in words[1:] if w[:1].islower())


def _unbullet(sentence: str) -> str:
    """The sentence without the bullet a list sets before it: any symbol, dash or private-use glyph ("\u25b8",
    "\u2219", a symbol font's "\uf0b7"), not a currency sign."""
    k = 0
    while k < len(sentence) and (sentence[k] in "*\u00b7 " or unicodedata.category(sentence[k]) in ("So", "Sm", "Pd", "Co")):
        k += 1
    return sentence[k:]


def running_words(sentence: str) -> list[str]:
    """The words of a sentence a blank can be cut from, or [] when it is no fit: 8 to 30 words, a capital first,
    a period last (or, ending a block, a statement: `_statement`), no citation, link, symbol or numbered parenthesis, no pronoun first that needs the sentence
    before, no heading run into it."""
    listed = _unbullet(sentence)
    bullet, sentence = listed != sentence, re.sub(r"^\d{1,2}\s+(?=[A-Z][a-z])", "", listed)  # a bullet, a note mark
    words = sentence.split()
    # a capital first, or a bullet's number (a slide's "\u25b8 47,308 respondents in 2019 ..."; without the bullet
    # a sentence starting with a number is the rest of one cut at a line: "0.0075 for 2 days, after which ...")
    if not MIN_WORDS <= len(words) <= MAX_WORDS or not (words[0][:1].isupper() or bullet and _NUMBER.match(words[0])):
        return []
    if not sentence.endswith(".") and not _statement(words):
        return []
    if re.search(r"\([^)]*\d[^)]*\)|[\[\]{}<>|@/\\=+*#_\u2022]|https?:|www\.|et al|e\.g\.|i\.e\.|"
                 r"\b(arxiv|preprint|proceedings|pp\.|vol\.|doi)\b", sentence, re.I):  # a reference list's entry too
        return []
    if words[0].lower().strip(",") in _NEEDS_CONTEXT:
        return []
    if _NO_STATEMENT.search(sentence):  # a field, console output, a link's title, a legal notice: no statement
        return []
    if re.match(r"(table|figure|fig\.|exhibit|chart)\s+[\dA-Z][\w.\-]*\s*[:.]|(notes?|sources?)\b", sentence, re.I):
        return []  # a caption run on, a table's note or source line
    if re.search(r":\s*\d{1,2}\.$", sentence):  # "... in order: 1." - a list cut at its first item
        return []
    # what the text layer garbled is not quoted as the page prints it: a footnote mark glued to a word
    # ("Ball-Tree13"), a flattened formula ("F0.5", "Q% approximately"), a ligature lost ("generaHon",
    # "transac^onal", "Offi cers"), a digit read for a letter ("I2 hotels"), a bullet read as a letter ("\u00cc Choose")
    if _GARBLED.search(sentence) or (len(words[0]) == 1 and words[0] not in "AI"):
        return []
    if re.fullmatch(r"I{1,3}", words[0]) and words[1][:1].isupper():  # "I PayPal converts ...": a symbol font's box
        return []
    if len({w.lower().strip(",;:.") for w in words} & _ENGLISH) < 2:  # the rules read English: German sets every
        return []  # noun in capitals, and other languages' numbers and abbreviations read otherwise
    lead = next((k for k, w in enumerate(words) if not (w[:1].isupper() or w == "&")), len(words))
    if lead >= 4:  # a heading run into its paragraph ("Random Seeds & Example Sampling All experiments ...")
        return []
    return words


def prose(words: list[str], skip: set[int]) -> bool:
    """Whether the words outside `skip` read as text (not glued cells or symbols)."""
    others = [w for k, w in enumerate(words) if k not in skip]
    return sum(bool(_WORD.match(w.strip("()\u201c\u201d\"'"))) for w in others) >= 0.9 * len(others)


def _blanks(sentence: str, region_text: str = "") -> list[tuple[str, str]]:
    """(the sentence with one of its numbers blanked, that number as printed) for each number a blank can ask for;
    [] when the sentence is no fit (module doc)."""
    words = running_words(sentence)
    digits = [i for i, w in enumerate(words) if re.search(r"\d", w)]
    if not 1 <= len(digits) <= MAX_NUMBERS or not prose(words, set(digits)):
        return []  # glued cells, symbols: not running text
    out = []
    for i in digits:
        m = _NUMBER.match(words[i])
        if not m or _YEAR.match(m.group(2)) and not m.group(3):
            continue
        value = float(m.group(2).replace(",", "") + (m.group(3) or ""))
        if (value in (0.0, 1.0) or value < 10 and not m.group(3)) and not (m.group(1) or m.group(4)):  # "___ days a week", "in ___ languages: English, ...",
            continue  # "a multiplier of ___": a small count or setting is a guess away
        if any(re.fullmatch(r"\d{3}[.,;:]?", w) for w in words[i + 1:i + 2]) or (i and re.fullmatch(r"\d{1,3}", words[i - 1])):
            continue  # "30 000": one number printed with a space between its thousands
        if _repeated(region_text, m.group(2) + (m.group(3) or "")):  # "the 6-month limit" in every sentence around
            continue
        if any((o := _NUMBER.match(w)) and o.group(2) == m.group(2) for k, w in enumerate(words) if k != i):
            continue  # "--frames 1000 will stop the server after ___ steps": the sentence prints it again
        if any(w.lower().strip(".,;:") in _NAMED_BY for w in words[max(0, i - 3):i]):  # "Tables 1 and 2", "Form 1040"
            continue
        if i > 1 and words[i - 1][:1].isupper():  # "Executive Order 13788", "COVID 19": part of a name
            continue
        if not _amount(words, i, m):  # "runway 21 and", "strategic objective 4.1.": a label, not an amount
            continue
        if m.group(4) and _complement(words, i, m):  # "54% ... ___%": the other share gives it away
            continue
        if _guessed(words, i, m, value):
            continue
        blanked = [*words[:i], f"{m.group(1)}___{m.group(4)}{m.group(5)}", *words[i + 1:]]
        out.append((" ".join(blanked), f"{m.group(2)}{m.group(3) or ''}"))
    return out


# words after which a number states an amount ("is 1.32", "approximately 30", "from August 9 to 16")
_BEFORE_AMOUNT = frozenset("is are was were be been of by to than about around approximately nearly almost over under "
                           "up least most exceed exceeds from and or with at for in on only just some all total every "
                           "per the a roughly exactly more less fewer between within after before last first next top "
                           "additional another reached reach".split())
_CONJUNCTIONS = frozenset("and or but nor so yet".split())


def _amount(words: list[str], i: int, m: re.Match[str]) -> bool:
    """Whether the number at `words[i]` states an amount: a share, a sum of money, a number that counts the word
    after it ("22 episodes"), or one after a word that introduces an amount ("is", "approximately"); a number
    after a noun it labels ("runway 21", "objective 4.1") is none."""
    if m.group(4) or m.group(1):  # "80%", "$40"
        return True
    after = words[i + 1].lower().strip(".,;:") if i + 1 < len(words) else ""
    if not m.group(5) and after and after.isalpha() and after not in _CONJUNCTIONS:
        return True
    return i == 0 or words[i - 1].lower().strip(".,;:") in _BEFORE_AMOUNT


_MONTH = re.compile(r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?[,;]?$")  # "may" is a verb


_BOUND = frozenset("ended ending through until to and".split())


def _guessed(words: list[str], i: int, m: re.Match[str], value: float) -> bool:
    """Whether the blank is read off a convention rather than the page: the day that ends a period or a range ("as of
    ___ December 2020", "the year ended ___ March", "June 15 and ___"; a reader guesses the month's end or the next
    day), the whole of something ("___% of the proceeds", "___ percent"). A day a date states ("on ___ March 2020")
    is asked."""
    if value <= 31 and value == int(value) and not (m.group(1) or m.group(4)):
        near = words[max(0, i - 3):i] + words[i + 1:i + 2]
        before = [w.lower().strip(".,;:") for w in words[max(0, i - 2):i]]
        bound = bool(before) and (before[-1] in _BOUND or before == ["as", "of"])
        month = any(_MONTH.match(w) and len(w.strip(".,;")) >= 3 for w in near)
        days = [k for k in range(max(0, i - 4), min(len(words), i + 5)) if k != i and re.fullmatch(r"\d{1,2}[.,;]?", words[k])
                and int(words[k].strip(".,;")) <= 31]
        if month and (bound or days):  # the other end of the range gives this one away
            return True
    after = words[i + 1].lower().strip(".,;:") if i + 1 < len(words) else ""
    return value == 100 and (bool(m.group(4)) or after in ("percent", "per")) and not m.group(3)


def _repeated(text: str, number: str) -> bool:
    """Whether the region prints the number three times or more: the blank is read off the sentences around it."""
    return len(re.findall(rf"(?<![\d.,]){re.escape(number)}(?![\d]|[.,]\d)", text)) >= 3


def _complement(words: list[str], i: int, m: re.Match[str]) -> bool:
    """Whether another share of the sentence and this one add up to 100 (one is the rest of the other)."""
    value = float(m.group(2).replace(",", "") + (m.group(3) or ""))
    others = [re.match(r"^(\d+(?:\.\d+)?)%", w) for k, w in enumerate(words) if k != i]
    return any(o and abs(float(o.group(1)) + value - 100) < 1e-9 for o in others)


MIN_MARGIN_LINES = 5


@lru_cache(maxsize=4096)
def margin_numbers(page_text: str) -> frozenset[str]:
    """The line numbers a page prints in its margin (a preprint's "46", "47", "48", ... one per line): five bare
    numbers or more, most of them one after the other. The text layer runs them into the sentences beside them."""
    nums = sorted({int(ln) for ln in page_text.split("\n") if re.fullmatch(r"\s*\d{1,4}\s*", ln)})
    steps = sum(b - a == 1 for a, b in zip(nums, nums[1:]))
    return frozenset(map(str, nums)) if len(nums) >= MIN_MARGIN_LINES and steps * 5 >= 3 * (len(nums) - 1) else frozenset()


def quotable(sentence: str, common: frozenset[str], margin: frozenset[str]) -> bool:
    """A sentence a blank may quote: printed in one document only (`common`: a disclaimer, a boilerplate paragraph
    printed in several), and holding none of its page's margin line numbers (it would not read as printed)."""
    return sentence not in common and not (margin and margin & {w.strip(".,;:()") for w in sentence.split()})


def cloze_candidates(text: str, common: frozenset[str] = frozenset(), margin: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Every usable (blanked sentence, number) of a text region (module doc) from the sentences it may quote
    (`quotable`)."""
    return [b for s in sentences(text) if quotable(s, common, margin) for b in _blanks(s, text)]


def pick_blank(rng: random.Random, cands: list[tuple[str, str]],
               fits: Callable[[str, str], bool] | None) -> tuple[str, str] | None:
    """One (blanked sentence, answer) of `cands` at random that `fits` accepts (the document prints the sentence
    with no other word in the blank), or None."""
    if fits is None:
        return rng.choice(cands) if cands else None
    order = list(cands)
    rng.shuffle(order)
    return next((c for c in order if fits(*c)), None)


def cloze_question(rng: random.Random, text: str, label: str, common: frozenset[str] = frozenset(),
                   margin: frozenset[str] = frozenset(),
                   fits: Callable[[str, str], bool] | None = None) -> tuple[str, str] | None:
    """(question, answer) for one sentence of the region naming its document, a number blanked, or None."""
    got = pick_blank(rng, cloze_candidates(text, common, margin), fits) if label else None
    if got is None:
        return None
    blanked, value = got
    return f"In {label}, what number fills the blank in the sentence \u201c{blanked}\u201d?", value
