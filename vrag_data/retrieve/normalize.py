"""Query normalisation: one rewrite of a question or search query, shared by every searcher a workspace opens.

`load_index` wraps the workspace's searcher in `NormalizedSearcher`, so the search server and the agent
environments (both open the index through `load_index`) send the very same rewritten query to the index.

What the rewrite does, and why (measured on financial filings, where plain BM25 missed most gold pages):
- answer-format instructions ("Round your answer to two decimal places", "Answer in millions") are removed:
  they are about the reply, not the evidence, and their words ("rounded", "millions") pull boilerplate pages up;
- fiscal-year forms (`FY2019`, `F2019`, `FY 19`, `fiscal 2019`, `fiscal year 2019`) become the year `2019`,
  the form in which statements print it (no page holds the term "fy2019");
- short abbreviations that carry meaning (`R&D`, `EPS`, `SG&A`) are kept and followed by their words: the
  analyser drops single letters, so `R&D` alone matches nothing;
- tickers found on the documents' covers (`ADBE` -> the company's name) are followed by the company's name;
- a financial metric is followed by the line items and statements it is computed from (`finance_vocab`).
Added words come after `EXPANSION_MARK`; BM25 weighs them less than the question's own words.
Pure functions; the aliases come from `document_aliases` at index time and travel with the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from vrag_data.retrieve.finance_vocab import expand_metrics

# Abbreviations worth keeping, with the words the pages print instead (matched as whole words, any case).
ABBREVIATIONS: dict[str, str] = {
    "R&D": "research and development",
    "SG&A": "selling, general and administrative",
    "PP&E": "property, plant and equipment",
    "D&A": "depreciation and amortization",
    "M&A": "mergers and acquisitions",
    "P&L": "profit and loss",
    "EPS": "earnings per share",
    "COGS": "cost of goods sold",
    "YoY": "year over year",
    "CEO": "chief executive officer",
    "CFO": "chief financial officer",
}

# A clause that only tells how to format the answer. Clauses are cut at sentence ends and at "?"; the
# instruction often follows the question mark without a space ("in FY2021?Answer in millions").
_FORMAT_CLAUSE = re.compile(
    r"^\s*(?:please\s+)?(?:"
    r"round(?:ed)?\b[^.?!]*\b(?:decimal|places?|nearest|integer|digits?|significant|whole|percent)|"  # "Round ... to 3 decimals"
    r"an[sw]{2}er\s+(?:in|as|with|using)\b|"  # "Answer in millions", "Anwser in percentage terms"
    r"(?:give|provide|express|write|report|state|format)\s+(?:your|the|all|it|them|each)\b[^.?!]*"
    r"\b(?:answer|decimal|million|thousand|billion|percent|percentage|list|format|form|integer)|"
    r"enumerate\b[^.?!]*\blist\b|"
    r"(?:your\s+)?answer\s+(?:should|must)\b"
    r")", re.IGNORECASE)
# The same instructions trailing a question inside one clause: "..., rounded to two decimal places".
_FORMAT_TAIL = re.compile(
    r",?\s*\b(?:round(?:ed)?\s+(?:your\s+answer\s+|the\s+answer\s+|it\s+)?to\s+(?:the\s+nearest\s+\w+|"
    r"\w+\s+decimal(?:\s+places?)?|\w+\s+significant\s+\w+)|an[sw]{2}er\s+in\s+(?:\w+\s+){0,2}"
    r"(?:millions?|thousands?|billions?|terms?|percent(?:age)?))\b\.?", re.IGNORECASE)
_CLAUSE = re.compile(r"[^.?!]+[.?!]*|[.?!]+")

# Separates the query from the words `finance_vocab` appended; BM25 weighs those less (`Bm25Params.w_expansion`),
# other searchers read it as punctuation.
EXPANSION_MARK = " ⊕ "

_FY4 = re.compile(r"\b(?:FY|F)\s?'?((?:19|20)\d{2})\b", re.IGNORECASE)
_FY2 = re.compile(r"\bFY\s?'?(\d{2})\b", re.IGNORECASE)
_FISCAL = re.compile(r"\bfiscal(?:\s+year)?\s+((?:19|20)\d{2})\b", re.IGNORECASE)


class QueryOptions(BaseModel):
    """Which rewrites run; recorded with the index (`index/current.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    strip_format: bool = True
    fiscal_years: bool = True
    abbreviations: bool = True
    aliases: bool = True
    finance_vocab: bool = True


def strip_format_instructions(query: str) -> str:
    """The query without its answer-format clauses; the query itself when nothing else would remain."""
    kept = [c for c in _CLAUSE.findall(query) if not _FORMAT_CLAUSE.match(c)]
    out = _FORMAT_TAIL.sub("", "".join(kept))
    out = re.sub(r"\s+", " ", out).strip()
    return out if re.search(r"\w", out) else query.strip()


def fiscal_years(query: str) -> str:
    """`FY2019` / `F2019` / `FY 19` / `fiscal (year) 2019` -> `2019`."""
    query = _FISCAL.sub(r"\1", query)
    query = _FY4.sub(r"\1", query)
    return _FY2.sub(lambda m: f"20{m.group(1)}", query)


def _word(token: str) -> re.Pattern[str]:
    # whole word, where "word" may contain & (R&D): no letter or digit on either side
    return re.compile(rf"(?<![\w&]){re.escape(token)}(?![\w&])", re.IGNORECASE)


_ABBR = {k: _word(k) for k in ABBREVIATIONS}


def expand_abbreviations(query: str) -> str:
    """Each known abbreviation stays and is followed by its words: "R&D costs" -> "R&D (research and
    development) costs"; an expansion already present is not added again."""
    for abbr, words in ABBREVIATIONS.items():
        if words.lower() in query.lower():
            continue
        query = _ABBR[abbr].sub(lambda m, w=words: f"{m.group(0)} ({w})", query)
    return query


def alias_names(query: str, aliases: Mapping[str, str]) -> list[str]:
    """Company names for the tickers in the query (matched case-sensitively: "ADBE", not "adbe"). A ticker that is
    the start of its own name ("MGM" of MGM Resorts, "COST" of Costco) already names the company: nothing added."""
    # the query's words once (a word may hold &, as the abbreviations do), not one regex per alias of the corpus:
    # this runs for every query of every episode, and a corpus of filings has thousands of tickers
    words = set(re.findall(r"[\w&]+", query))
    added: list[str] = []
    for alias, name in aliases.items():
        if alias not in words or name in added:
            continue
        if name.lower().replace(" ", "").startswith(alias.lower()) or name.lower() in query.lower():
            continue
        added.append(name)
    return added


def normalize_query(query: str, options: QueryOptions | None = None,
                    aliases: Mapping[str, str] | None = None) -> str:
    """The rewritten query (see the module doc); deterministic, idempotent on its own output's words."""
    o = options or QueryOptions()
    q = " ".join(query.split())
    if o.strip_format:
        q = strip_format_instructions(q)
    if o.fiscal_years:
        q = fiscal_years(q)
    if o.abbreviations:
        q = expand_abbreviations(q)
    if EXPANSION_MARK in q:
        return q  # already normalised: the rewrite is idempotent
    extra = alias_names(q, aliases) if o.aliases and aliases else []
    if o.finance_vocab:
        extra.append(expand_metrics(q))
    extra = [e for e in extra if e]
    return f"{q}{EXPANSION_MARK}{' '.join(extra)}" if extra else q


# -- aliases from document metadata -------------------------------------------------------------------------

# A 10-K/10-Q cover lists "Title of each class | Trading Symbol(s) | Name of each exchange": the text layer
# reads "Common Stock, par value ... ADBE Nasdaq Global Select Market"; press releases say "(NYSE: AXP)".
_TICKER_BEFORE_EXCHANGE = re.compile(
    r"\b([A-Z]{1,5})\s+(?:The\s+)?(?:Nasdaq|NASDAQ|New York Stock Exchange|NYSE)\b")
_TICKER_AFTER_EXCHANGE = re.compile(r"\((?:NYSE|NASDAQ|Nasdaq|NasdaqGS)\s*:\s*([A-Z]{1,5})\)")
_NOT_TICKERS = {"LLC", "INC", "THE", "PAR", "USD", "II", "III", "A", "B", "C", "NA", "ON"}
_HEXLIKE = re.compile(r"^[0-9a-f]{16,}$", re.IGNORECASE)


def company_name(stem: str) -> str:
    """The company part of a filing's file name: "AMAZON_2017_10K" -> "AMAZON", "JOHNSON_JOHNSON_2023_8K" ->
    "JOHNSON JOHNSON"; "" for names that are not "<COMPANY>_<year>..." (hashes, free-form titles)."""
    if _HEXLIKE.match(stem):
        return ""
    parts = re.split(r"[_\s]+", stem)
    words: list[str] = []
    for p in parts:
        if re.match(r"^\d{4}", p):
            return " ".join(words) if words and all(w.isalpha() for w in words) else ""
        words.append(p)
    return ""


def tickers_in(text: str) -> set[str]:
    found = set(_TICKER_BEFORE_EXCHANGE.findall(text)) | set(_TICKER_AFTER_EXCHANGE.findall(text))
    return {t for t in found if t not in _NOT_TICKERS and len(t) >= 2}


def document_aliases(docs: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """(stem, title, text of the first pages) per document -> {alias: company name}. The name is the file
    name's company part, else the title; the aliases are the tickers printed on the cover."""
    out: dict[str, str] = {}
    for stem, title, head_text in docs:
        name = company_name(stem).title() or title.strip()
        if sum(c.isalpha() for c in name) < 3:  # "0000078003-23-000088": a filing number, not a name
            continue
        for t in sorted(tickers_in(head_text)):
            if t.lower() != name.lower():
                out.setdefault(t, name)
    return out
