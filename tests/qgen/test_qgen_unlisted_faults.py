"""Issue 52, round 5 (faults the round-4 hand checks found on held-out filings, papers, slides, surveys and
statements): a table is found by what it prints, never by an order the extractor may have miscounted; cells the
extractor moved, labels it cut and totals it did not mark are not asked or weighed; quotes read as printed; a
document is named whatever its page 1 looks like. Each test fails on the code before this round."""

from __future__ import annotations

import random
from pathlib import Path

import pymupdf

from tests.qgen.test_qgen_tables import _region
from vrag_data.qgen.cloze import cloze_candidates, sentences
from vrag_data.qgen.docname import document_label
from vrag_data.qgen.first_page import first_heading, largest_font_text
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.naming import position_reference, table_name
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.survey import answer_shares, share_question
from vrag_data.qgen.terms import term_candidates
from vrag_data.qgen.text_scope import text_scope
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.schema.records import Page

LABEL = "\u201cCity of Abbotsford\u201d"
OBLIGATION = "| | 2012 | 2011 |\n|---|---|---|\n| Accrued benefit obligation | 9,120 | 8,004 |\n| Benefits paid | 410 | 388 |"
ASSUMPTIONS = "| | 2012 | 2011 |\n|---|---|---|\n| Discount rate | 3.9% | 4.4% |\n| Expected wage increase | 2.5% | 2.5% |"


def test_a_table_among_several_is_found_by_a_row_only_it_prints_on_the_files_page() -> None:
    # the page prints three tables; the extractor found two. "The second table" would point at the wrong one.
    page = ("Accrued benefit obligation\n9,120\n8,004\nBenefits paid\n410\n388\nAccrued benefit liability\n1,200\n"
            "Discount rate\n3.9%\n4.4%\nExpected wage increase\n2.5%\n2.5%\n9\n")
    ref = position_reference(ASSUMPTIONS, page, 14, [OBLIGATION, ASSUMPTIONS], LABEL)
    assert ref == f"the table listing \u201cDiscount rate\u201d on PDF page 14 (printed as page 9) of {LABEL}"
    # one table on the page: its place is enough, and the page is the file's page
    assert position_reference(OBLIGATION, "Accrued benefit obligation\n9,120\n", 3, [OBLIGATION], LABEL) == \
        f"the table on PDF page 3 of {LABEL}"


def test_a_statements_notes_column_holds_references_no_value_is_asked_from_it() -> None:
    md = ("| | Notes | 2026 | 2025 |\n|---|---|---|---|\n| Gain on disposal | 12 | 1,450 | 980 |\n"
          "| Finance income | 14 | 2,210 | 1,870 |\n| Finance cost | 15 | 3,005 | 2,660 |")
    region = _region(md, stem="fs", page=6, title="Statement of Cash Flows")
    w = OracleWriter({}, {"fs": LABEL})
    outs = [w.write_sync(Attempt(i, Evidence("single", (region,)), "extraction")) for i in range(30)]
    asked = {o.cells[0][2] for o in outs if isinstance(o, Written)}
    assert asked and "Notes" not in asked, asked


def test_a_line_that_adds_up_the_lines_above_is_never_weighed_against_one_of_them() -> None:
    md = ("| | Q2 2026 | Q1 2026 |\n|---|---|---|\n| Compensation and benefits | 20,231 | 19,880 |\n"
          "| Promotional | 17,346 | 16,120 |\n| Depreciation | 11,400 | 10,950 |\n| Acquisition costs | 48,977 | 46,950 |")
    questions = _comparisons(md)
    assert questions and not any("Acquisition costs" in q for q in questions), questions


def _comparisons(md: str) -> list[str]:
    """The "which is higher" questions the writer makes of one table of an earnings release (40 attempts)."""
    region = _region(md, stem="lpl", page=19, title="Acquisition Cost Summary")
    w = OracleWriter({}, {"lpl": "\u201cLPL Financial Announces Second Quarter 2026 Results\u201d"})
    outs = [w.write_sync(Attempt(i, Evidence("single", (region,)), "logic")) for i in range(40)]
    return [o.question for o in outs if isinstance(o, Written)]


def test_a_label_cut_over_two_lines_and_the_rest_of_a_label_are_not_asked() -> None:
    md = ("| | Q2 2026 | Q1 2026 |\n|---|---|---|\n| Interest expense on borrowings on Condensed Consolidated | | |\n"
          "| Statements of Income | 1,204 | 1,188 |\n| Deferred | 310 | 290 |\n| memberships | | |\n"
          "| Heritage grant | 54 | 50 |\n| Capital grants | 75 | 70 |")
    g = table_grid(md)
    rows = {r for r, _, _ in g.cells}
    assert "Statements of Income" not in rows and "Deferred" not in rows, rows
    assert g.heads.get("Heritage grant", "") != "memberships"  # the lower-case rest of a label heads nothing
    assert {"Heritage grant", "Capital grants"} <= rows


def test_a_value_the_extractor_moved_into_an_empty_cell_is_not_asked() -> None:
    md = ("| | Interest Rate | Maturity |\n|---|---|---|\n| Bank term loan | 6.10% | 03/15/2027 |\n"
          "| Equipment financing | 5.45% | 09/30/2028 |\n| Senior notes | 4.63% | 11/15/2029 |\n| Revolver | 6.25% | 06/01/2026 |\n"
          "| Total / Weighted Average | | 5.222% |")
    cells = {(r, c): v for r, c, v in table_grid(md).cells}
    assert ("Total / Weighted Average", "Maturity") not in cells
    assert cells[("Senior notes", "Maturity")] == "11/15/2029"


def test_a_field_value_printed_over_a_table_is_not_its_name() -> None:
    md = "| | 30-Jun-26 | 30-Jun-25 |\n|---|---|---|\n| Free float units | 1,200 | 1,100 |\n| Free float percentage | 20% | 19% |"
    page = "Company name:\nLSF Holdings\nBoard Listed:\nMain Board\n30-Jun-26\n30-Jun-25\nFree float units\n1,200\n1,100\n" \
           "Free float percentage\n20%\n19%\n"
    assert table_name(md, page, [md]) != "Main Board"


def test_a_contents_line_or_an_early_slide_of_references_does_not_end_the_document() -> None:
    def page(stem: str, n: int, text: str) -> Page:
        return Page(page_id=f"{stem}_{n}", doc_id=stem, stem=stem, page=n, image="x.jpg", width=10, height=10, dpi=72,
                    text=text)

    paper = [page("jcap", 1, "Title"), page("jcap", 2, "Contents\n1. Introduction\n3\nReferences\n14\n\n1. Introduction\n"),
             *[page("jcap", n, "Body text.") for n in range(3, 14)], page("jcap", 14, "References\n[1] A. Author ...")]
    nav = "Introduction\nInstallation\nReferences\n"  # a talk's navigation bar, on every slide
    talk = [page("talk", 1, "Debug PHP"), *[page("talk", n, nav + "Slide.") for n in range(2, 41)]]
    # a paper whose appendix (model outputs, worked examples) follows a reference list before its middle page
    long = [page("star", n, "Body text.") for n in range(1, 10)] + [page("star", 10, "References\n[1] A. Author")] + \
        [page("star", n, "Appendix E. Sampled outputs.") for n in range(11, 26)]
    scope = text_scope(paper + talk + long, {"jcap": "J", "talk": "T", "star": "S"})
    assert scope.body("jcap", 9) and not scope.body("jcap", 14)
    assert scope.body("talk", 20)
    assert scope.body("star", 9) and not scope.body("star", 20)


def test_quotes_keep_a_printed_hyphen_and_whole_numbers_and_skip_what_states_nothing() -> None:
    text = ("The second highest count came in April. NOAA has estimated that in 2024, April had the second-\n"
            "highest tornado count on record, surpassing the 550 tornadoes of May 2003.")
    assert "second-highest" in sentences(text)[1]
    # a number printed with a space between its thousands is one number
    assert not any(v in ("30", "000") for _, v in cloze_candidates("Search is performed with 30 000 query descriptors "
                                                                      "from the holiday images."))
    # a small count a list gives away; a legal notice; a dataset's example; console output; a link's title
    for s in ("The survey was administered in 3 languages: English, Japanese and Spanish.",
              "Postgres and the Slonik Logo are trademarks or registered trademarks of the PostgreSQL Community Association.",
              "Text: The most successful sidecar racer won 21 races in the Isle of Man TT series.",
              "Number of iterations till stop: 4 Achieved convergence tolerance: 1.45e-06 and the fit stopped.",
              "Wikipedia - Must know 25 concepts in Deep Learning and how they relate to each other."):
        assert cloze_candidates(s) == [] and term_candidates(s) == [], s


def test_a_connective_or_a_name_its_sibling_gives_away_is_no_blank() -> None:
    assert not any(t == "AKA" for _, t in term_candidates(
        "My work is looking at sustainable transportation, AKA moving people without burning fuel in cities."))
    assert not any(t == "Left Spine" for _, t in term_candidates(
        "If there are two foot nodes, the content is split into the Left Spine and the Right Spine of the tree."))


def _pdf(tmp: Path, name: str, draw) -> str:  # noqa: ANN001 - a drawing callback
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    draw(page)
    path = tmp / name
    doc.save(path)
    return str(path)


def test_a_drop_cap_a_journals_masthead_and_a_turned_page_do_not_hide_the_title(tmp_path: Path) -> None:
    def paper(page) -> None:  # noqa: ANN001
        page.insert_text((60, 80), "Efficient nearest neighbor search using navigable graphs", fontsize=22)
        page.insert_text((60, 300), "C", fontsize=40)  # the drop cap opening the introduction
        for k in range(30):
            page.insert_text((90, 320 + 14 * k), "onsider a set of points in a metric space and a query point nearby.", fontsize=10)

    assert largest_font_text(_pdf(tmp_path, "p.pdf", paper)) == "Efficient nearest neighbor search using navigable graphs"
    # a journal's masthead printed larger than the paper's title: the metadata title page 1 prints names it
    text = "Journal of Statistical Software\nTIMP: An R Package for Modeling Spectroscopic Measurements\nKatharine Mullen\n"
    assert document_label(text, "TIMP: An R Package for Modeling Spectroscopic Measurements",
                          largest="Journal of Statistical Software") == \
        "\u201cTIMP: An R Package for Modeling Spectroscopic Measurements\u201d"

    def turned(page) -> None:  # noqa: ANN001
        # a landscape brochure stored as a portrait page turned by 90 degrees: its lines run up the stored page
        page.insert_text((100, 700), "RuleML Symposium Conference Program", fontsize=24, rotate=90)
        page.insert_text((200, 700), "Orlando, Florida, with sessions on rule interchange", fontsize=9, rotate=90)
        page.set_rotation(90)

    assert largest_font_text(_pdf(tmp_path, "t.pdf", turned)) == "RuleML Symposium Conference Program"


def test_a_question_set_large_or_a_plain_top_line_is_quoted_as_a_heading(tmp_path: Path) -> None:
    q = "Which sector would you assign your company to?"
    assert document_label(q + "\nResults\n", largest=q) == f"the document whose first page is headed \u201c{q}\u201d"
    # a report whose title names what it reports on is a name, not a filing's "Annual report pursuant ..." line
    t = "Annual Report of Survey Activities on Refuges"
    assert document_label(t + "\nAlaska Region\n2021\n", largest=t) == f"\u201c{t}\u201d"

    def notes(page) -> None:  # noqa: ANN001
        page.insert_text((60, 60), "MATH 3100 FALL 2020", fontsize=11)
        for k in range(40):
            page.insert_text((60, 80 + 14 * k), "Sample space is the set of all outcomes of a random experiment here.", fontsize=11)

    path = _pdf(tmp_path, "n.pdf", notes)
    assert largest_font_text(path) == "" and first_heading(path) == "MATH 3100 FALL 2020"


def test_a_surveys_answer_shares_give_questions_when_the_page_has_no_sentence() -> None:
    page = ("Which sector would you assign your company to?\nkeyboard_arrow_down\nResults\nAutomotive\n26.09%\n"
            "Software and IT\n30.43%\nMachinery and plant\nengineering\n30.43%\nScience\n8.70%\nOther\n0.00%\nFree-texts\n"
            "Automotive\nAutomotive\nSoftware and IT\n")
    got = answer_shares(page)
    # the wrapped answer is not asked (its label is two lines), nor a share of nobody
    assert [(a, s) for _, a, s in got] == [("Automotive", "26.09%"), ("Software and IT", "30.43%"), ("Science", "8.70%")]
    q, a = share_question(page, page, "\u201cSDVN survey\u201d", (page,), random.Random(0).choice)  # type: ignore[misc]
    assert q.startswith("In \u201cSDVN survey\u201d, what share of respondents answered \u201c") and \
        q.endswith("to the question \u201cWhich sector would you assign your company to?\u201d?") and a.endswith("%")
    # a follow-up question needs the one before it
    assert answer_shares(page.replace("Which sector would", "If so, which sector would")) == []
    # a survey question printed twice in the document (two waves) names no single answer
    assert share_question(page, page, "\u201cSDVN survey\u201d", (page, page), random.Random(0).choice) is None
    # the writer asks it of a text region on such a page that prints the answer and its share (the evidence shows
    # what is asked), not of the block that holds the question only
    region = _region("x", stem="sdvn", page=1, title="")
    block = region.block.model_copy(update={"cls": "text", "text": "Which sector would you assign your company to?"})
    w = OracleWriter({}, {"sdvn": "\u201cSDVN survey\u201d"}, text_scope([region.page], {}))
    assert not w.accepts(type(region)(block, region.page.model_copy(update={"text": page}), "text"))
    block = region.block.model_copy(update={"cls": "text", "text": "Automotive\n26.09%\nSoftware and IT\n30.43%"})
    region = type(region)(block, region.page.model_copy(update={"text": page}), "text")
    scope = text_scope([region.page], {"sdvn": "\u201cSDVN survey\u201d"})
    w = OracleWriter({}, {"sdvn": "\u201cSDVN survey\u201d"}, scope)
    assert w.accepts(region)
    out = w.write_sync(Attempt(0, Evidence("single", (region,)), "extraction"))
    assert isinstance(out, Written) and out.answer in {"26.09%", "30.43%"}, out
    assert not isinstance(out, Rejected)


def test_a_header_whose_day_of_the_year_runs_into_the_next_columns_words_names_no_columns() -> None:
    md = ("| | Balance at December 31 Contributions 2022 | Balance at December 31 Contributions Received | "
          "Balance at Investment Income |\n|---|---|---|---|\n| Heritage grant | 11,814 | 42,348 | 391 |\n"
          "| Development | 79,905,741 | 12,862,987 | 2,513,620 |")
    assert table_grid(md).problem
    fine = "| | December 31, 2023 | December 31 2022 |\n|---|---|---|\n| Heritage grant | 54,553 | 11,814 |\n| Roads | 120 | 110 |"
    assert not table_grid(fine).problem


def test_a_survey_chart_whose_text_layer_prints_answers_by_their_shares_gives_a_share_question() -> None:
    page = ("Which supplier level would you assign your company to?\nResults\nOEM\n26.09%\nTier 1\n30.43%\nTier 2\n"
            "17.39%\nHighcharts.com\n")
    region = _region("x", stem="sdvn", page=1, title="")
    chart = region.block.model_copy(update={"cls": "chart", "text": "Results OEM 26.09% Tier 1 30.43% Tier 2 17.39% Values 0 0.1"})
    region = type(region)(chart, region.page.model_copy(update={"text": page}), "chart")
    w = OracleWriter({}, {"sdvn": "\u201cSDVN survey\u201d"}, text_scope([region.page], {}))
    assert w.accepts(region)
    out = w.write_sync(Attempt(0, Evidence("single", (region,)), "extraction"))
    assert isinstance(out, Written) and out.answer in {"26.09%", "30.43%", "17.39%"}, out
    # a chart whose labels do not stand by their shares gives none
    loose = chart.model_copy(update={"text": "OEM Tier 1 Tier 2 26.09% 30.43% 17.39%"})
    assert not w.accepts(type(region)(loose, region.page, "chart"))


def test_a_bullets_number_starts_a_statement_a_bare_number_starts_a_fragment() -> None:
    assert ("\u25b8 ___ respondents in 2019 answered the survey (no requirement to answer all questions)"[2:], "47,308") in \
        cloze_candidates("\u25b8 47,308 respondents in 2019 answered the survey (no requirement to answer all questions)")
    assert cloze_candidates("0.0075 for 2 days, after which it will return to the value 0.0, indicating no infection.") == []


def test_a_question_holding_an_unreadable_character_is_refused() -> None:
    from vrag_data.qgen.writer import check_question
    from vrag_data.schema.records import Document

    doc = Document(doc_id="d1", stem="amherstburg", source_path="a.pdf", kind="pdf", n_pages=3, n_bytes=100, title="a")
    labels = {"amherstburg": "\u201cTown of Amherstburg\u201d"}
    q = "In the table of information about the Town\ufffds defined benefit plans in \u201cTown of Amherstburg\u201d, what is the 2022 value of Interest?"
    out = check_question(Written(q, "455,600", "Str", "extraction", ("455,600",), "oracle"), [doc], [doc], labels)
    assert isinstance(out, Rejected) and out.reason == "garbled_text"
    fine = q.replace("\ufffd", "\u2019")
    assert check_question(Written(fine, "455,600", "Str", "extraction", ("455,600",), "oracle"), [doc], [doc], labels) is None


def test_a_currency_column_mark_glued_to_a_name_an_unbalanced_heading_and_an_open_line_end_are_not_asked() -> None:
    md = "| | June 30, 2026 $ \u2014 | December 31, 2025 $ \u2014 |\n|---|---|---|\n| Customer deposits | 41.2 | 45.1 |\n| Dividends | 16.9 | 16.4 |"
    assert table_grid(md).problem
    md = ("| | Pre-tax Income | Earnings Per Share |\n|---|---|---|\n| Electric Costs) | | |\n| Interest charges | (1.2) | (0.02) |"
          "\n| Payroll | (0.8) | (0.01) |")
    assert "Electric Costs)" not in table_grid(md).heads.values()
    assert cloze_candidates("EPA has had annual program announcements in the STAR program with focus on 12 sites and") == []


def test_a_flattened_power_a_mark_for_a_value_and_two_names_joined_by_and_are_no_blanks() -> None:
    # "11.44 \u00d7 10^9 y" reads "11.44 \u00d7 109 y" in the text layer: 109 is not what the page shows
    assert cloze_candidates("The age of the universe in this model is around 11.44 \u00d7 109 years for the values used here.") == []
    md = "| Feature | Arrow | Cats |\n|---|---|---|\n| Typeclasses | \u2713 | \u2715 |\n| Effects | 12 | 9 |\n| Optics | 4 | 2 |"
    assert all(v not in ("\u2713", "\u2715") for _, _, v in table_grid(md).cells)
    terms = {t for _, t in term_candidates("We thank Henk van Elst and Thomas Buchert for useful discussions of the model.")}
    assert "Elst and Thomas Buchert" not in terms and "Elst" not in terms and "Thomas Buchert" not in terms, terms
    terms = {t for _, t in term_candidates("Gear is certified by the American Society for Testing and Materials in every lab.")}
    assert "Society for Testing" not in terms and "American Society for Testing" not in terms, terms


def test_a_total_named_as_its_section_is_not_weighed_and_a_small_caps_title_is_whole(tmp_path: Path) -> None:
    md = ("| | Q2 2026 | Q1 2026 |\n|---|---|---|\n| Acquisition costs | | |\n| Compensation and benefits | 22,454 | 19,880 |\n"
          "| Promotional | 17,346 | 16,120 |\n| Amortization | 9,400 | 8,950 |\n| Acquisition Cost | 61,216 | 56,950 |")
    questions = _comparisons(md)
    assert questions and not any("Acquisition Cost" in q.split(":")[-1] for q in questions), questions

    def small_caps(page) -> None:  # noqa: ANN001 - capitals large, the rest of each word smaller, in pieces
        x = 60.0
        for word in ("LoftQ:", "LoRA-Fine-Tuning-Aware", "Quantization"):
            page.insert_text((x, 80), word[0], fontsize=17)
            page.insert_text((x + 11, 80), word[1:].upper(), fontsize=13.8)
            x += 12 + 10 * len(word)
        for k in range(30):
            page.insert_text((60, 140 + 14 * k), "Quantization is an indispensable technique for serving large models.", fontsize=10)

    big = largest_font_text(_pdf(tmp_path, "s.pdf", small_caps))
    assert big.startswith("LOFTQ:") and "QUANTIZATION" in big, big


def test_a_neutral_heading_is_a_heading_not_a_columns_first_line(tmp_path: Path) -> None:
    def survey(page) -> None:  # noqa: ANN001
        page.insert_text((320, 50), "(or why they cannot imagine such a thing) and which input", fontsize=10)
        page.insert_text((60, 60), "SURVEY", fontsize=10)
        for k in range(40):
            page.insert_text((60, 80 + 14 * k), "Participants described how they search the web on a phone.", fontsize=10)

    assert first_heading(_pdf(tmp_path, "v.pdf", survey)) == "SURVEY"


# -- faults the held-out sets AK-AN showed, measured as found on 587c58a ---------------------------------------


def test_a_signature_stamp_under_the_letter_is_no_title(tmp_path: Path) -> None:
    def letter(page) -> None:  # noqa: ANN001 - an exchange filing's cover letter, signed digitally at its foot
        page.insert_text((60, 50), "Cipla Ltd.", fontsize=9)
        for k in range(32):
            page.insert_text((60, 80 + 14 * k), "We are enclosing herewith a copy of the transcript of the earnings call.", fontsize=11)
        page.insert_text((60, 560), "RAJENDR", fontsize=16)
        page.insert_text((60, 578), "A KUMAR", fontsize=16)
        page.insert_text((200, 560), "Digitally signed by RAJENDRA KUMAR CHOPRA", fontsize=7)

    assert largest_font_text(_pdf(tmp_path, "c.pdf", letter)) == "Cipla Ltd."


def test_a_pages_margin_line_numbers_keep_its_sentences_out_of_quotes() -> None:
    from vrag_data.qgen.cloze import margin_numbers

    page = "\n".join(f"Line of the notes number {k} runs here and on.\n{k}" for k in range(46, 56))
    margin = margin_numbers(page)
    assert {"46", "50", "55"} <= margin
    text = "In practice this can be efficiently computed 69 using the Fast Fourier Transform over 128 cells."
    assert cloze_candidates(text, frozenset(), frozenset({"69"})) == []
    assert term_candidates(text, frozenset(), frozenset({"69"})) == []
    assert margin_numbers("Roads\n1,200\n12\n2023\n7\n") == frozenset()  # a few bare values are no margin


def test_a_survey_legend_printed_above_shares_set_first_gives_no_pairs_and_contacts_no_columns() -> None:
    page = ("How likely are you to recommend the course to your friends?\nDetractor\nPassive\nPromoter\n34%\nDetractor\n"
            "52%\nPassive\n15%\nPromoter\n")
    assert answer_shares(page) == []
    md = "| | Analyst Relations | geoffrey.weiss@cibc.com |\n|---|---|---|\n| Phone | 416-980-5093 | 416-980-5093 |\n| Fax | 1 | 2 |"
    assert table_grid(md).problem


def test_a_label_wrapped_in_capitals_and_a_title_hyphen_at_a_line_end_read_as_printed() -> None:
    md = ("| | Q3 2023 | Q3 2022 |\n|---|---|---|\n| INCOME/(LOSS) FROM CONTINUING OPERATIONS | | |\n"
          "| BEFORE INCOME TAXES | 1,972 | 1,517 |\n| Provision for income taxes | 268 | 193 |\n| Net income | 1,704 | 1,324 |")
    assert "BEFORE INCOME TAXES" not in {r for r, _, _ in table_grid(md).cells}
    assert document_label("Step-by-\nStep Guide to AVERT\n", largest="Step-by-\nStep Guide to AVERT") == "\u201cStep-by-Step Guide to AVERT\u201d"
    assert "stylegan-encoder" in sentences("We compare StyleGAN2 morphs and the stylegan-\nencoder morphs at one threshold; "
                                           "each encoder runs once.")[0]


def test_boxes_of_names_laid_out_in_a_grid_are_no_table() -> None:
    md = ("| sys_open | sys_linkat | sys_symlink |\n|---|---|---|\n| sys_rename | sys_mkdir | sys_rmdir |\n"
          "| sys_nmount | sys_unlink | sys_chmod |")
    assert table_grid(md).problem


def test_a_document_with_a_table_or_two_keeps_its_text_in_the_pool() -> None:
    from vrag_data.qgen.evidence import EvidencePool

    def region(stem: str, page: int, source: str):  # noqa: ANN202
        r = _region("| a | b |\n|---|---|\n| x | 1 |", stem=stem, page=page, title="")
        return type(r)(r.block.model_copy(update={"cls": source}), r.page, source)

    paper = [region("paper", 1, "table"), region("paper", 2, "text"), region("paper", 3, "text")]
    filing = [region("tenk", k, "table") for k in (1, 2, 3)] + [region("tenk", 4, "text")]
    pool = EvidencePool({"paper": paper, "tenk": filing}, {}).tables_first()
    assert sum(r.source == "text" for r in pool.by_doc["paper"]) == 2  # its one table may give nothing
    assert all(r.source == "table" for r in pool.by_doc["tenk"])


def test_speech_broken_off_and_a_sentence_cut_at_an_abbreviation_are_not_quoted() -> None:
    assert cloze_candidates("At least -- the market was $800 million, $900 million pre generic in that year.") == []
    text = "You may need to follow the Party Wall etc. Act 1996 and may have to serve a Party Wall Notice on 12 owners."
    assert len(sentences(text)) == 1
    assert all(not b.startswith("Act 1996") for b, _ in term_candidates(text))


def test_a_word_broken_at_a_line_end_is_mended_and_a_contents_run_is_no_sentence() -> None:
    text = "Initial testing shows that morphs take around 12 min-\nutes for projecting faces with the com-\nmon threshold."
    assert "12 minutes" in sentences(text)[0] and "common threshold" in sentences(text)[0]
    assert cloze_candidates("Simulating Gaussian random fields 1.1 Definitions and properties 1.2 Diagonality of covariance "
                            "in Fourier space and sampling.") == []


def test_slide_boxes_run_together_are_no_statement() -> None:
    boxes = "Intermediate Method Historical hourly emission rates from 2019 modeling Dispatch or capacity expansion"
    assert cloze_candidates(boxes) == [] and term_candidates(boxes) == []


def test_a_number_the_sentence_prints_twice_two_sentences_glued_and_a_ligature_in_a_title() -> None:
    assert not any(v == "1000" for _, v in cloze_candidates(
        "Instead, a maximum number of frames may be given; for instance, --frames 1000 will stop the server after 1000 steps."))
    assert term_candidates("Start number specifies the number of the first frame. yuv420p pix format for QuickTime "
                           "compatibility is the default here.") == []
    assert document_label("RoboCup 2D Half Field O\ufb00ense Technical Manual\n",
                          largest="RoboCup 2D Half Field O\ufb00ense Technical Manual") == \
        "\u201cRoboCup 2D Half Field Offense Technical Manual\u201d"
    md = "| | 2025 | 2024 |\n|---|---|---|\n| Capitalized research and development | 10,739 | 6,294 |\n| Leases | 1,200 | 1,100 |"
    page = "The significant components of deferred tax assets were as follows as of September 27 (in millions):\n" + \
           "2025\n2024\nCapitalized research and development\n10,739\n6,294\nLeases\n1,200\n1,100\n"
    assert not table_name(md, page, [md]).startswith("table of as of")


# -- faults the held-out sets AO-AR showed, measured as found on 7142082 ---------------------------------------


def test_a_box_heading_set_a_point_larger_below_the_title_is_no_name(tmp_path: Path) -> None:
    def factsheet(page) -> None:  # noqa: ANN001
        page.insert_text((30, 40), "American Funds Global Insight", fontsize=11)
        page.insert_text((30, 54), "Fund", fontsize=11)
        page.insert_text((36, 180), "Fund Information", fontsize=12)
        for k in range(45):
            page.insert_text((36, 200 + 11 * k), "The fund seeks to provide prudent growth of capital and income.", fontsize=8)

    assert largest_font_text(_pdf(tmp_path, "f.pdf", factsheet)) == "American Funds Global Insight Fund"


def test_a_wrapped_column_name_with_the_next_one_glued_on_names_no_column() -> None:
    md = ("| ID | Avg_Clar- Avg_Relevance | Avg_Accuracy |\n|---|---|---|\n| E1 | 5.00 | 4.50 |\n| D3 | 4.75 | 4.25 |"
          "\n| B2 | 4.50 | 4.00 |")
    assert table_grid(md).problem


def test_a_short_form_paired_with_another_and_a_lead_in_of_several_tables_are_not_used() -> None:
    text = "The de Bruijn graph of a set of DNA or RNA sequences is a data structure used in genome assembly."
    assert not any(t in ("DNA", "RNA") for _, t in term_candidates(text))
    md = "| | 2023 | 2022 |\n|---|---|---|\n| Raw materials | 120 | 110 |\n| Finished goods | 300 | 280 |"
    page = "The following tables show the Company's inventories and other non-current assets (in millions):\n" + \
           "2023\n2022\nRaw materials\n120\n110\nFinished goods\n300\n280\n"
    assert "inventories" not in table_name(md, page, [md])


# -- faults the held-out sets AS-AV showed, measured as found on 172ccf2 ---------------------------------------


def test_a_hyphen_kept_inside_a_broken_word_and_a_contents_link_as_heading_are_undone() -> None:
    from vrag_data.qgen.docname import neutral_reference

    text = "All figures are in the appendix. The fig-ures of the second study show 12 groups of plants in total."
    assert "The figures of the second study" in " ".join(sentences(text))
    twice = "The e-mail was sent. Each e-mail carries 3 links to the survey form for the respondents."
    assert "e-mail" in " ".join(sentences(twice))  # printed hyphenated twice: a compound, kept
    assert neutral_reference("Table of Contents") == "" and neutral_reference("Maintenance Log") != ""
