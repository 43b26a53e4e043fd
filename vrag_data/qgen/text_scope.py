"""Which printed text a question may quote, and which documents a name tells apart.

- A sentence printed in more than one document of the workspace (an agency's disclaimer on every accident report,
  a licence paragraph) has no one document to name, and one printed on two pages of a document is its boilerplate
  (a footer, a notice): no blank is cut from either.
- A paper's reference list and what follows it (appendices of dataset examples, prompts, annotation guides) are
  no statement of the document: text questions come from the pages before the first page headed "References"
  ("Bibliography", "Works Cited").
- A line printed on page after page of a document (a running header or footer: "THE COMPANY", "CITY OF
  VANCOUVER") names no table on those pages.
- Two documents with the same readable name ("National Transportation Safety Board Aviation Accident Final
  Report") cannot be told apart by it: a table question would be about either, so none is asked of them (a text
  question quotes a sentence only one of them prints).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from vrag_data.qgen.cloze import sentences
from vrag_data.qgen.grid import section_key
from vrag_data.schema.records import Page

_BACK_MATTER = re.compile(r"^\s*(?:[\dIVX]+\.?\s+)?(references|bibliography|works cited|literature cited)\s*$",
                          re.I | re.M)
RUNNING_PAGES = 3  # a line printed on this many pages of a document is a running header or footer
_MIN_SENTENCE = 40  # characters: shorter lines ("Page 1 of 4") are no sentences a blank is cut from


@dataclass(frozen=True)
class TextScope:
    common: frozenset[str] = frozenset()  # sentences printed in more than one document
    shared_names: frozenset[str] = frozenset()  # stems whose readable name another document also has
    back_matter: dict[str, int] = field(default_factory=dict)  # stem -> first page headed "References"
    running: dict[str, frozenset[str]] = field(default_factory=dict)  # stem -> lines (`section_key`) printed on page after page
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # stem -> its pages' text
    # stem -> `common` and the sentences printed on two of its own pages (worked out once, in `text_scope`)
    repeated: dict[str, frozenset[str]] = field(default_factory=dict)

    def boilerplate(self, stem: str) -> frozenset[str]:
        """Sentences no blank is cut from in the document: printed in another document too, or on two of its own
        pages (a footer's "Not an official record.", a notice repeated page after page)."""
        return self.repeated.get(stem, self.common)

    @cached_property
    def _flat(self) -> dict[str, tuple[str, ...]]:
        """Each document's pages with their whitespace run together (as quotes read), made once."""
        return {stem: tuple(" ".join(t.split()) for t in ts) for stem, ts in self.texts.items()}

    def everywhere(self, stem: str, term: str) -> bool:
        """Whether a term is printed on `RUNNING_PAGES` pages of the document or more: its subject or its maker
        ("United States" in a constitution, a vendor in every footer, "GC" in a deck on garbage collection), or on
        both pages of a two-page document (a fact sheet's product): a blank a reader fills without looking."""
        texts = self.texts.get(stem, ())
        return sum(term in t for t in texts) >= min(RUNNING_PAGES, max(2, len(texts)))  # both pages of a fact sheet

    @cached_property
    def _words(self) -> frozenset[str]:
        """The lower-case words the workspace's documents print."""
        return frozenset(w for ts in self.texts.values() for t in ts for w in re.findall(r"(?<![\w./:@-])[a-z]+(?![\w/@:-]|\.\w)", t))

    def plain(self, stem: str, term: str) -> bool:
        """Whether the document prints the term in lower case as well ("and" for "AND", "solar system" for "Solar
        System"), or, for one word, any document of the workspace does ("ALWAYS"): an ordinary word set in capitals
        for emphasis or as a heading, no name a blank can ask for."""
        low = term.lower()
        if low == term:
            return False
        if low in self._words:
            return True
        pattern = re.compile(rf"(?<![\w./:@-]){re.escape(low)}(?![\w/@:-]|\.\w)")
        return any(pattern.search(t) for t in self.texts.get(stem, ()))

    def one_answer(self, stem: str, blanked: str, answer: str) -> bool:
        """Whether the blank of a quoted sentence has one answer in the document: no page prints the sentence with
        other words in the blank (a deck repeating a slide's line with "VaR" for "CVaR")."""
        head, _, tail = blanked.partition("___")
        frame = [re.escape(w) for w in head.split()] + ["(.{1,80}?)"] + [re.escape(w) for w in tail.split()]
        pattern = re.compile(r"\s*".join(frame))
        return all(" ".join(m.group(1).split()) == answer for t in self._flat.get(stem, ())
                   for m in pattern.finditer(t))

    def body(self, stem: str, page: int) -> bool:
        """Whether a page's text is the document's own statement (before its reference list)."""
        return page < self.back_matter.get(stem, 10**9)


def _back_matter(text: str) -> bool:
    """Whether a page opens the reference list: a "References" line that no page number follows (a contents page
    lists "References 14" and the paper goes on)."""
    return any(not re.match(r"\s*(?:\.\s*)*\d{1,4}\s*(?:\n|$)", text[m.end():]) for m in _BACK_MATTER.finditer(text))


def text_scope(pages: Iterable[Page], labels: dict[str, str]) -> TextScope:
    docs_of: dict[str, set[str]] = defaultdict(set)
    pages_of: dict[str, Counter[str]] = defaultdict(Counter)
    back: dict[str, int] = {}
    lines_on: dict[str, Counter[str]] = defaultdict(Counter)
    texts: dict[str, list[str]] = defaultdict(list)
    for p in pages:
        texts[p.stem].append(p.text)
        lines_on[p.stem].update({n for ln in p.text.splitlines() if re.search(r"[a-z]{3}", n := section_key(ln))})
        on_page = {s for s in sentences(p.text) if len(s) >= _MIN_SENTENCE}
        pages_of[p.stem].update(on_page)
        for s in on_page:
            docs_of[s].add(p.stem)
        if p.page > 1 and _back_matter(p.text):
            back[p.stem] = min(back.get(p.stem, p.page), p.page)
    named = Counter(v for v in labels.values() if v)
    shared = frozenset(s for s, v in labels.items() if v and named[v] > 1)
    running = {stem: frozenset(ln for ln, n in c.items() if n >= RUNNING_PAGES) for stem, c in lines_on.items()}
    # a talk's navigation bar prints "References" on every slide: a running line, no reference list
    back = {stem: n for stem, n in back.items() if not any(_BACK_MATTER.match(ln) for ln in running.get(stem, ()))}
    common = frozenset(s for s, d in docs_of.items() if len(d) > 1)
    return TextScope(common, shared, back, running, {stem: tuple(t) for stem, t in texts.items()},
                     {stem: common | {x for x, n in c.items() if n >= 2} for stem, c in pages_of.items()})
