"""Issue 52, faults the round-10 hand checks found (tuning data from then on): a footer sentence printed on every page
of a council's minutes was quoted ("Not an official ___ record."), and a deck whose first page is blank was named by
its metadata title "PowerPoint Presentation", a generator's default. Each test fails on the code of round 10."""

from __future__ import annotations

from vrag_data.qgen.cloze import cloze_candidates
from vrag_data.qgen.docname import readable_title
from vrag_data.qgen.terms import term_candidates
from vrag_data.qgen.text_scope import text_scope
from vrag_data.schema.records import Page

FOOTER = "Minutes prepared by the Office of the City Clerk and not an official record of the 12 members."


def _page(n: int, body: str) -> Page:
    return Page(page_id=f"minutes_{n}", doc_id="sha_minutes", stem="minutes", page=n, image=f"pages/minutes_{n}.jpg",
                width=1000, height=1400, dpi=144, text=f"{body}\n{FOOTER}")


def test_a_sentence_printed_on_two_pages_of_a_document_gives_no_blank() -> None:
    pages = [_page(1, "The council approved 14 street repairs for the coming season at its first meeting."),
             _page(2, "The council heard 3 residents on the new parking rules at the Civic Center hall.")]
    scope = text_scope(pages, {"minutes": "\u201cCommon Council Minutes\u201d"})
    off = scope.boilerplate("minutes")
    assert FOOTER in off
    assert all("prepared by" not in b for b, _ in cloze_candidates(pages[0].text, off) + term_candidates(pages[0].text, off))
    assert [a for _, a in cloze_candidates(pages[0].text, off)] == ["14"]


def test_powerpoints_default_title_is_no_name() -> None:
    assert not readable_title("PowerPoint Presentation")
    assert readable_title("Quarterly Results Presentation")
