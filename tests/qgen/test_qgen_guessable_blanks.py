"""Issue 52, after round 7: a blank asks for what only the page tells. A name is capitalised wherever the document
prints it: a word or phrase the document also prints in lower case ("and" for "AND", "solar system" for "Solar
System") is an ordinary word set in capitals, which a reader fills without looking. A number that ends a period or a
range ("as of ___ December", "June 15 and ___") or stands for the whole ("___% open") is read off a convention.
Each test fails on the code of round 7."""

from __future__ import annotations

import random

from vrag_data.qgen.cloze import cloze_candidates
from vrag_data.qgen.terms import term_question
from vrag_data.qgen.text_scope import TextScope

LABEL = "\u201cCutoff convergence tool guide\u201d"


def _asked(region: str, document: tuple[str, ...]) -> set[str]:
    scope = TextScope(texts={"guide": document})
    got = {term_question(random.Random(i), region, LABEL, guessable=lambda t: scope.plain("guide", t))
           for i in range(40)}
    return {g[1] for g in got if g}


def test_a_word_the_document_also_prints_in_lower_case_is_no_blank() -> None:
    region = ("Of course since in this example the same value is used for both minimum AND maximum cutoff, the run "
              "stops after the first step.")
    page = "The tool runs a series of calculations and reads the energies and forces of each one."
    assert _asked(region, (region, page)) == set()
    # the same sentence in a document that never prints the plain word: the capitals are all there is to go by
    assert _asked(region, (region,)) == {"AND"}


def test_a_phrase_printed_in_lower_case_elsewhere_is_no_name_while_a_name_stays() -> None:
    region = ("The course then covers how the Solar System formed from a disk of gas, using data from the "
              "Jet Propulsion Laboratory archive.")
    other = "Each planet of the solar system is treated in its own chapter, with exercises at the end."
    assert _asked(region, (region, other)) == {"Jet Propulsion Laboratory"}
    # a short form printed in lower case only inside a web address is still a name
    scope = TextScope(texts={"guide": ("Requests go over HTTP to the server.", "See http://example.org/api.")})
    assert scope.plain("guide", "HTTP") is False


def test_a_day_that_ends_a_period_or_a_range_and_a_whole_hundred_are_no_blanks() -> None:
    text = ("The balance by industry is given as of 30 December 2020 for every segment of the group. "
            "The next two events are on 15 June and 16 June at the main office of the company. "
            "Our commitment to open models means that we provide 100% open access to the data and the code. "
            "The accounts cover the year ended 31 March 2021 and were audited by the regional firm. "
            "The agency declared a public health emergency on 17 March 2020 after the first cases.")
    assert [a for _, a in cloze_candidates(text)] == ["17"]


def test_a_page_heading_is_the_first_top_line_that_can_head_it(tmp_path) -> None:  # noqa: ANN001
    from tests.qgen.test_qgen_unlisted_faults import _pdf
    from vrag_data.qgen.first_page import first_heading

    body = "The company recognises revenue when control of the goods passes to the customer here."

    def notes(page) -> None:  # noqa: ANN001 - a 10-K page: the contents link above the entity's line
        page.insert_text((60, 50), "Table of Contents", fontsize=10)
        page.insert_text((60, 70), "Northwind Traders and Subsidiaries", fontsize=10)
        for k in range(30):
            page.insert_text((60, 100 + 14 * k), body, fontsize=10)

    def letter(page) -> None:  # noqa: ANN001 - a shareholder letter: a date, a salutation, a field's label
        for k, line in enumerate(("January 19, 2023", "Fellow shareholders,", "Summary:")):
            page.insert_text((60, 50 + 20 * k), line, fontsize=10)
        for k in range(30):
            page.insert_text((60, 120 + 14 * k), body, fontsize=10)

    def manual(page) -> None:  # noqa: ANN001 - a title that runs on to its subtitle after a colon
        page.insert_text((60, 50), "Portable Radiometer v3 Series:", fontsize=10)
        for k in range(30):
            page.insert_text((60, 80 + 14 * k), body, fontsize=10)

    assert first_heading(_pdf(tmp_path, "n.pdf", notes)) == "Northwind Traders and Subsidiaries"
    assert first_heading(_pdf(tmp_path, "l.pdf", letter)) == ""
    assert first_heading(_pdf(tmp_path, "m.pdf", manual)) == "Portable Radiometer v3 Series:"
