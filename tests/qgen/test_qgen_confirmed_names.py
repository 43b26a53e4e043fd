"""Issue 52 (held-out sets of papers, 10-Ks, survey reports, manuals): a question is kept only when every name in
it is confirmed on the page. Faults 1-4 and 6: a paper's caption printed above its table is that table's, not
the one under the table before it; a filing's name is its company, not its date line; a running header above
prose names no table (the table is then named by its place on the page); codes are never compared; the tasks
report outlines the asked cell only."""

from __future__ import annotations

from pathlib import Path

from tests.qgen.test_qgen_tables import _region
from vrag_data.qgen.codes import code_column
from vrag_data.qgen.docname import document_label
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.report import _cells
from vrag_data.qgen.writer import Attempt, Rejected, Written, check_question
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Document, EvidenceBox

ABLATION = "| Model | Acc |\n|---|---|\n| Base | 71.2 |\n| Large | 74.9 |"
DEV = "| Task | F1 |\n|---|---|\n| SQuAD | 88.5 |\n| NER | 92.4 |"
# a page of a paper that prints captions above its tables; each header is printed on one line ("Model Acc")
PAPER_PAGE = "\n".join([
    "Table 2: Controlled comparison of model sizes.", "Model Acc", "Base", "71.2", "Large", "74.9",
    "Table 3: Results on the development sets.", "Task F1", "SQuAD", "88.5", "NER", "92.4",
    "We report the median of five runs in every table of this section."])


def test_a_caption_above_its_table_names_that_table_not_the_table_above_it() -> None:
    tables = [ABLATION, DEV]
    assert table_name(ABLATION, PAPER_PAGE, tables) == "Table 2 (Controlled comparison of model sizes)"
    assert table_name(DEV, PAPER_PAGE, tables) == "Table 3 (Results on the development sets)"


COVER = "\n".join([
    "UNITED STATES", "SECURITIES AND EXCHANGE COMMISSION", "Washington, D.C. 20549", "FORM 10-K",
    "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
    "For the fiscal year ended December 31, 2018", "(Exact name of registrant as specified in its charter)",
    "Commission file number 1-3285", "3M COMPANY", "State of Delaware"])


def test_a_filing_is_named_by_its_company_never_by_its_date_line() -> None:
    largest = "For the fiscal year ended December 31, 2018"  # the cover's largest type: the logo is an image
    assert document_label(COVER, largest=largest) == \
        "the Form 10-K of 3M Company for the fiscal year ended December 31, 2018"
    # a page 1 whose only large line is a date names no document: no question says "in the December 31, 2018"
    assert document_label("December 31, 2018\nsome words on the page", largest="December 31, 2018") == ""


SAMPLE = "| Group | Unweighted sample size | Plus or minus |\n|---|---|---|\n| Total sample | 1,509 | 2.9 |\n" \
         "| Rep/lean Rep | 639 | 4.5 |\n| Dem/lean Dem | 772 | 4.1 |"
LABEL = "\u201cGun Policy Survey Methodology\u201d (2016)"


def test_a_running_header_above_prose_names_no_table_its_place_on_the_page_does() -> None:
    region = _region(SAMPLE, stem="methods", page=5, title="")
    page = region.page.model_copy(update={"tables_md": [SAMPLE], "text": "\n".join([
        "PEW RESEARCH CENTER", "The following table shows the unweighted sample sizes and the error attributable",
        "to sampling that would be expected at the 95% level of confidence for different groups in the survey.",
        "Group", "Unweighted sample size", "Plus or minus", "Total sample", "1,509", "2.9", "Rep/lean Rep", "639",
        "4.5", "Dem/lean Dem", "772", "4.1"])})
    region = type(region)(region.block, page, "table")
    assert table_name(SAMPLE, page.text, page.tables_md) == ""
    w = OracleWriter({}, {"methods": LABEL}).write_sync(Attempt(0, Evidence("single", (region,)), "extraction"))
    assert isinstance(w, Written), w
    assert w.question.startswith(f"In the table on PDF page 5 of {LABEL}, what is the ")
    doc = Document(doc_id="sha_methods", stem="methods", source_path="methods.pdf", kind="pdf", n_pages=7, n_bytes=1)
    assert check_question(w, [doc], [doc], {"methods": LABEL}) is None  # its place is a true reference


DISPOSITIONS = "| Disposition | AAPOR code |\n|---|---|\n| Completed interview | 1.1 |\n| Refusal | 2.11 |\n" \
               "| Non-contact | 2.20 |\n| Unknown eligibility | 3.21 |"


def test_codes_are_never_compared() -> None:
    assert code_column("AAPOR code", ["1.1", "2.11"]) and code_column("Phone", ["555-0100"])
    assert code_column("Issued", ["2019", "2020", "2021"]) and not code_column("Revenue", ["1,204", "2,003"])
    region = _region(DISPOSITIONS, stem="methods", page=7, title="Final Dispositions")
    out = [OracleWriter({}, {"methods": LABEL}).write_sync(Attempt(i, Evidence("single", (region,)), "logic"))
           for i in range(6)]
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in out), out


def test_the_report_outlines_the_asked_cell_not_every_cell_printing_its_value(tmp_path: Path) -> None:
    import pymupdf

    pdf = tmp_path / "t.pdf"
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=300)
    for y, label in ((60, "Alpha"), (100, "Beta"), (140, "Gamma")):
        page.insert_text((40, y), label, fontsize=11)
        page.insert_text((200, y), "42", fontsize=11)
    doc.save(pdf)
    box = EvidenceBox(page_id="t_1", box=Box.from_raw((0, 0, 400, 300), 400, 300))  # page px = points at w=400
    rects = _cells(str(pdf), box, ["42"], 400, [("Beta", "42")])
    assert len(rects) == 1 and 88 < (rects[0][1] + rects[0][3]) / 2 < 100  # on Beta's line (baseline 100)


def test_a_document_without_tables_gets_a_text_question_with_a_number_blanked() -> None:
    from vrag_data.qgen.cloze import cloze_candidates

    text = ("The survey was conducted among 2,010 adults living in all 50 states.\n"
            "As many as 17 attempts were made to contact every sampled telephone number.\n"
            "Pursuant to the Executive Order 13788, the agency reviews its grants each year.\n"
            "This shows that 12 of them answered.\nThe figure was first printed in 1789 by the department.")
    # no number of a name ("Order 13788"), no pronoun needing the sentence before, no year
    blanks = [("The survey was conducted among ___ adults living in all 50 states.", "2,010"),
              ("The survey was conducted among 2,010 adults living in all ___ states.", "50"),
              ("As many as ___ attempts were made to contact every sampled telephone number.", "17")]
    assert cloze_candidates(text) == blanks
    region = _region("x", stem="methods", page=2, title="")
    block = region.block.model_copy(update={"cls": "text", "text": text})
    region = type(region)(block, region.page, "text")
    w = OracleWriter({}, {"methods": LABEL}).write_sync(Attempt(0, Evidence("single", (region,)), "extraction"))
    assert isinstance(w, Written)
    assert (w.question, w.answer) in [(f"In {LABEL}, what number fills the blank in the sentence \u201c{b}\u201d?", v)
                                      for b, v in blanks]


def test_a_forms_fields_give_no_table_question() -> None:
    form = "| Aircraft Make: | Beech |\n|---|---|\n| Model/Series: | A23 |\n| ELT: | Installed, not activated |"
    region = _region(form, stem="ntsb", page=2, title="Aircraft Information")
    out = OracleWriter({}, {"ntsb": "\u201cAviation Accident Final Report\u201d"}).write_sync(
        Attempt(0, Evidence("single", (region,)), "extraction"))
    assert isinstance(out, Rejected) and out.reason == "table_malformed", out


def test_labels_and_counts_of_different_things_are_no_amounts_to_ask_or_weigh() -> None:
    from vrag_data.qgen.cloze import cloze_candidates
    from vrag_data.qgen.docname import names_an_entity

    # a number that labels the noun before it is no amount: no blank for it
    assert cloze_candidates("According to the pilot, he was landing on runway 21 and the winds were light.") == []
    assert cloze_candidates("These orders served as the basis for the strategic objective 4.1 of the plan.") == []
    # a page header with the publisher's address, or a form's note, names no document
    assert not names_an_entity("1 PEW RESEARCH CENTER www.pewresearch.org AUGUST 2016 POLITICAL SURVEY")
    assert not names_an_entity("Ask Form 1 Only [N=740]")
    stats = "| Statistic | C++1000 | Python800 |\n|---|---|---|\n| #problems | 1,000 | 800 |\n" \
            "| #samples | 500,000 | 240,000 |"
    region = _region(stats, stem="codenet", page=8, title="Benchmark Statistics")
    out = [OracleWriter({}, {"codenet": LABEL}).write_sync(Attempt(i, Evidence("single", (region,)), "logic"))
           for i in range(4)]
    assert all(isinstance(o, Rejected) for o in out), out


def test_a_table_beside_one_the_extractor_missed_is_found_by_a_row_only_it_prints_not_by_its_order() -> None:
    from vrag_data.qgen.naming import position_reference

    page = "Table 1. Results on five models.\nModel\nAUROC\nTable 2. Detection of GPT-3 text.\n" + PAGE_BODY
    # two tables printed, one extracted: "the first table" could be either; its own row label tells
    assert position_reference(AUROC, page, 6, [AUROC], LABEL) == f"the table listing \u201cRoB-base\u201d on PDF page 6 of {LABEL}"
    # a row label printed twice on the page tells nothing: the next one is taken, none left gives no reference
    twice = page + "RoB-base is a baseline.\n"
    assert position_reference(AUROC, twice, 6, [AUROC], LABEL) == f"the table listing \u201cDetectGPT\u201d on PDF page 6 of {LABEL}"
    assert position_reference(AUROC, twice + "DetectGPT too.\n", 6, [AUROC], LABEL) == ""
    assert position_reference(AUROC, PAGE_BODY, 6, [AUROC], LABEL) == f"the table on PDF page 6 of {LABEL}"


AUROC = "| Method | Avg. |\n|---|---|\n| RoB-base | 0.77 |\n| DetectGPT | 0.83 |"
PAGE_BODY = "Method\nAvg.\nRoB-base\n0.77\nDetectGPT\n0.83\n"


def test_a_caption_names_no_document_and_a_sentence_keeps_its_compounds_and_drops_run_in_headings() -> None:
    from vrag_data.qgen.cloze import cloze_candidates
    from vrag_data.qgen.docname import names_an_entity

    assert not names_an_entity("Table 1. Interpretation of Sequoia-Kings Canyon National Parks cluster analysis.")
    assert cloze_candidates("DAUs were 2.06 billion on average, an increase of 5% year-\nover-year.") == [
        ("DAUs were ___ billion on average, an increase of 5% year-over-year.", "2.06"),
        ("DAUs were 2.06 billion on average, an increase of ___% year-over-year.", "5")]
    assert cloze_candidates("Random Seeds & Example Sampling All experiments are run over the same set of 4 seeds.") == []


def test_a_caption_ending_in_an_acronym_stops_there_not_in_the_header() -> None:
    md = "| Parameter | Layers | Hidden Size |\n|---|---|---|\n| 336M | 24 | 1024 |\n| 1.3B | 24 | 2048 |"
    page = "Table 4. Model configurations used for BERT.\nParameter\nLayers\nHidden Size\n336M\n24\n1024\n1.3B\n24\n2048\n"
    assert table_name(md, page, [md]) == "Table 4 (Model configurations used for BERT)"
