"""Document names on every PDF of the shared corpus, against a table of names written by hand once
(tests/data/doc_names.tsv; split once into tuning and evaluation halves in bench/qgen_split.json).

A name matches when, lower-cased and split on anything not a letter or digit, it holds at least 80% of the
expected name's key words (the, of, and, ... left out): "the Form 10-K of Amazon.com, Inc. for the fiscal year
ended December 31, 2017" holds all of "Amazon.com 2017 Form 10-K". The rules read page 1's text, the metadata
title and page 1's largest font, as `tasks generate` does without a layout model: an image-only page has no name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vrag_data.qgen.docname import document_label
from vrag_data.qgen.first_page import largest_font_text

TABLE = Path(__file__).parents[1] / "data" / "doc_names.tsv"
_STOP = frozenset("the of and a an in on for via with to by its their".split())
# what a reader never calls a document: the header every filing, paper or report prints
BOILERPLATE = ("united states securities and exchange commission", "securities and exchange commission",
               "table of contents", "arxiv", "form 10 k", "form 10 q", "form 8 k", "annual report", "page 1")
# bench/RESULTS.md, "Document names (issue 41)": after the fix 30 of 45 match (19/23 tuning, 11/22 evaluation);
# the evaluation half, never looked at while fixing, is held at its measured figure, all 45 at one miss below 30
MATCH_RATE, EVALUATION_RATE = 29 / 45, 11 / 22
SPLIT = Path(__file__).parents[2] / "bench" / "qgen_split.json"


def words(text: str) -> list[str]:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).split()


def matches(name: str, expected: str) -> bool:
    key = [w for w in words(expected) if w not in _STOP]
    have = set(words(name))
    return bool(key) and sum(w in have for w in key) >= 0.8 * len(key)


def boilerplate(name: str) -> bool:
    """The name holds a page header that names no document ("securities and exchange commission", "table of
    contents", an arXiv stamp), or is nothing but such headers."""
    text = " ".join(words(name))
    if any(h in text for h in BOILERPLATE[1:4]):
        return True
    for header in BOILERPLATE:
        text = text.replace(header, " ")
    return bool(name.strip()) and not [w for w in text.split() if w not in _STOP and not w.isdigit()]


def expected_names() -> dict[str, str]:
    rows = [line.split("\t") for line in TABLE.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    return {f: n for f, n in rows}


def corpus_name(pdf: Path) -> str:
    import pymupdf

    with pymupdf.open(pdf) as doc:
        text, meta = (doc[0].get_text() if doc.page_count else ""), (doc.metadata or {}).get("title") or ""
    return document_label(text, meta, [], largest_font_text(str(pdf)))


@pytest.mark.slow
def test_names_of_the_45_corpus_documents_match_the_hand_table(shared_corpus: Path) -> None:
    table = expected_names()
    assert len(table) == 45
    names = {f: corpus_name(shared_corpus / "docs" / f) for f in table}
    headers = {f: n for f, n in names.items() if boilerplate(n)}
    assert not headers, f"names that are only a boilerplate header: {headers}"
    missed = {f: (names[f], table[f]) for f in table if not matches(names[f], table[f])}
    rate = 1 - len(missed) / len(table)
    assert rate >= MATCH_RATE, f"{rate:.0%} of 45 names match; missed (got, expected): {missed}"
    evaluation = json.loads(SPLIT.read_text(encoding="utf-8"))["evaluation"]
    assert sum(f not in missed for f in evaluation) >= EVALUATION_RATE * len(evaluation), missed


def test_the_match_rule_on_hand_examples() -> None:
    assert matches("the Form 10-K of Amazon.com, Inc. for the fiscal year ended December 31, 2017",
                   "Amazon.com 2017 Form 10-K")
    assert not matches("\u201cConscious Incompetence\u201d (2020)", "Knowledge-Grounded Answers (2023)")
    assert boilerplate("United States Securities and Exchange Commission Form 10-K")
    assert boilerplate("United States Securities And Exchange Commission Form 10-k 3m Company")
    assert not boilerplate("the Form 10-K of Netflix, Inc. for the fiscal year ended December 31, 2015")


PAPER = ("arXiv:2310.01234v2 [cs.CL] 3 Oct 2023\nRetrieval Grounded Answers for Tables\nAna Roe\nAbstract\n"
         "We follow the citation \u201cConscious Incompetence\u201d (2020) and extend it.\n")
# a cover set as a table: the registrant's caption is not on the line under its name
COVER = ("Table of Contents\nUNITED STATES\nSECURITIES AND EXCHANGE COMMISSION\nWashington, D.C. 20549\nForm 10-K\n"
         "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d)\nFor the fiscal year ended December 31, 2018\n"
         "Commission file number 1-3285\nDelaware\n41-0417775\n(Exact name of registrant as specified in its charter)\n")


def test_a_cover_and_a_paper_are_named_by_their_own_titles_not_by_headers_or_cited_works() -> None:
    largest = "UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM 10-K 3M COMPANY"
    assert document_label(COVER, "0000066740-19-000010", [], largest) == (
        "the Form 10-K of 3M Company for the fiscal year ended December 31, 2018")
    assert document_label(PAPER, "", [], "Retrieval Grounded Answers for Tables") == (
        "\u201cRetrieval Grounded Answers for Tables\u201d (2023)")
    assert document_label("Form 10-K\nAcme Corp\n(Exact name of registrant)\nFor the fiscal year ended May 1, 2020\n") \
        == "the Form 10-K of Acme Corp for the fiscal year ended May 1, 2020"
