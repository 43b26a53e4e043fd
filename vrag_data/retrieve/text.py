"""Turning page text and queries into BM25 terms (pure functions, no I/O).

One tokenizer serves pages and queries so that both sides agree on every term. Stemming uses PyStemmer
(a compiled Snowball stemmer that works offline); when it cannot be imported, terms stay unstemmed and the
manifest records that, so an index is never queried with a different analyser than it was built with.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from bm25s.stopwords import STOPWORDS_EN_PLUS

# Words that carry no evidence in a document question ("according to the report, what ...").
_QUESTION_WORDS = {
    "according", "answer", "document", "documents", "report", "page", "pages", "shown", "show", "shows",
    "mentioned", "mention", "following", "list", "please", "provide", "give", "tell", "many", "much",
    "among", "value", "total", "number", "what", "which", "who", "whom", "whose", "when", "where", "why",
    "how", "does", "did", "do", "is", "are", "was", "were", "be", "been", "the", "of", "in", "a", "an",
}

STOPWORDS: frozenset[str] = frozenset(STOPWORDS_EN_PLUS) | frozenset(_QUESTION_WORDS)

# Word characters; keeps numbers ("2018", "18.29" -> "18", "29") and splits on punctuation and hyphens.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


class _NoStemmer:
    def stemWord(self, word: str) -> str:  # noqa: N802 - mirrors PyStemmer's API
        return word


def _load_stemmer() -> tuple[object, str]:
    try:
        import Stemmer  # PyStemmer

        return Stemmer.Stemmer("english"), "snowball-english"
    except Exception:  # pragma: no cover - only when PyStemmer is missing or broken
        return _NoStemmer(), "none"


_STEMMER, STEMMER_NAME = _load_stemmer()


@lru_cache(maxsize=262_144)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)  # type: ignore[attr-defined]


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Lower-cased, stop-word-free, stemmed terms. Single letters are dropped; single digits are kept
    because page questions often hinge on them ("Figure 3", "Q4")."""
    out: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        if len(raw) < 2 and not raw.isdigit():
            continue
        if raw in stopwords:
            continue
        out.append(_stem(raw))
    return out


def term_counts(text: str) -> Counter[str]:
    return Counter(tokenize(text))


# "page 14", "slide 5", "p. 3", "pages 2": explicit page references in a question or query.
_PAGE_REF = re.compile(r"\b(?:pages?|slides?|p\.)\s*(\d{1,4})\b", re.IGNORECASE)
_COVER = re.compile(r"\b(?:cover|first|front|title)\s+(?:page|slide)\b", re.IGNORECASE)
_NUMBER_LINE = re.compile(r"^\s*(?:page\s+)?(\d{1,4})\s*$|^\s*(\d{1,4})\s{2,}\S|\S\s{2,}(\d{1,4})\s*$",
                          re.IGNORECASE)


def page_term(n: int) -> str:
    """The index term for "this is page n". Contains a space and a symbol, so no text ever produces it."""
    return f"§page {n}"


def statement_term(name: str) -> str:
    """The index term for "this page is the <name> statement" (same trick as `page_term`)."""
    return f"§statement {name}"


def page_refs(query: str) -> list[int]:
    refs = [int(m) for m in _PAGE_REF.findall(query)]
    if _COVER.search(query):
        refs.append(1)
    return refs


def page_labels(text: str, lines: int = 3) -> set[int]:
    """Printed page numbers: a number alone on one of the first/last lines, or set apart at a line's start or
    end ("16  Graduate Studies", "Annual Report  17"). Printed numbers often differ from the PDF page index."""
    body = [ln for ln in text.splitlines() if ln.strip()]
    out = set()
    for ln in body[:lines] + body[-lines:]:
        m = _NUMBER_LINE.search(ln)
        if m:
            out.add(int(next(g for g in m.groups() if g)))
    return out


def bigrams(tokens: list[str]) -> list[str]:
    """Adjacent analysed terms joined by a space (terms never contain one): "net revenu", "io 9"."""
    return [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]


def analyser_id() -> str:
    """Changes whenever the analyser would produce different terms; part of the index manifest."""
    return f"v4|{STEMMER_NAME}|stop={len(STOPWORDS)}"
