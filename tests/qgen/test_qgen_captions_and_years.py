"""Issue 41, round 4 (found on PDFs from outside the shared corpus, as found): a caption printed below one table is
not the caption of the next table printed under it; a caption's text may start on the line after its number and
never runs on into the table's header; a paper's year is not the year of a work it cites; a row's leading mark
("* Rita") is no part of its name."""

from __future__ import annotations

from tests.qgen import test_qgen_tables as T
from vrag_data.qgen.docname import document_label
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.cells import plain, quantity
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.scale import table_scale
from vrag_data.qgen.writer import Attempt, Rejected, Written


def _bridges(first: str, second: str, n: int) -> list[Written | Rejected]:
    """The offline writer's extraction questions over two tables of one report (pages 9 and 12)."""
    w = OracleWriter({}, T.LABELS)
    ev = Evidence("multi_page", (T._region(first, "report", 9), T._region(second, "report", 12)))
    return [w.write_sync(Attempt(i, ev, "extraction")) for i in range(n)]

DUMPS = """|  |  |  |
|---|---|---|
| Article | 1:dump | 2:coast |
| 2005-09-21 (1) | Rita | Texas |
| 2005-09-23 | Rita | New Orleans |
| 2005-10-28 | Beta | Nicaragua |"""
STORMS = """| Hurricane | Date (Affected Place) | Articles |
|---|---|---|
| Philippe | Sep 17-20 | 6 |
| * Rita | Sep 17-26 | 566 |
| * Beta | Oct 26-31 | 55 |"""
NOMINEES = """|  |  |  |
|---|---|---|
| Article | 1:confirm | 2:be-confirmed |
| 2005-09-21 | Senate | Roberts |
| 2005-11-17 | Fed | Bernanke |"""
# one page of a paper that prints captions below its tables: three tables, the second caption long and wrapped,
# the third caption's text on the line after its number; the first and third tables share the header "Article"
PAGE = "\n".join([
    "Article", "1:dump", "2:coast", "2005-09-21 (1)", "Rita", "Texas", "2005-09-23", "Rita", "New Orleans",
    "2005-10-28", "Beta", "Nicaragua",
    "1. More than 2,000 troops were put on alert as Rita slammed into the islands ...",
    "Table 5: Hurricane table and the actual expressions we", "used for extraction.",
    "Hurricane", "Date (Affected Place)", "Articles", "Philippe", "Sep 17-20", "6", "* Rita", "Sep 17-26", "566",
    "* Beta", "Oct 26-31", "55",
    "Table 6: Hurricanes in North America between mid-", "Sep.", "and Nov.", "(from Wikipedia).", "Rows with a",
    "star (*) were actually extracted. The number of the", "source articles that contained a mention of the",
    "hurricane is shown in the right column.", "",
    "Article", "1:conﬁrm", "2:be-conﬁrmed", "2005-09-21", "Senate", "Roberts", "2005-11-17", "Fed", "Bernanke", "",
    "Table 7:", "", "Nomination table (nominee confirmed by organisation)", "",
    "Acknowledgements", "This research was supported by a grant."])


def test_each_table_takes_the_caption_next_to_its_own_edge_not_the_one_below_the_table_above() -> None:
    tables = [DUMPS, STORMS, NOMINEES]  # the page's tables, as ingest lists them
    assert table_name(DUMPS, PAGE, tables) == "Table 5 (Hurricane table and the actual expressions we used...)"
    assert table_name(STORMS, PAGE, tables) == "Table 6 (Hurricanes in North America between mid-Sep. and Nov)"
    assert table_name(NOMINEES, PAGE, tables) == "Table 7 (Nomination table (nominee confirmed by organisation))"


def test_a_caption_above_its_table_does_not_run_on_into_the_header() -> None:
    md = "|  | Year | Number of Farms |\n|---|---|---|\n|  | 1880 | 1,597 |\n|  | 1890 | 2,039 |"
    page = "County Historic Building Survey\n\nTable 2. Number of Farms, 1850-1950\nYear\nNumber of Farms\n" \
           "1880\n1,597\n1890\n2,039\nSource: census.\n"
    assert table_name(md, page) == "Table 2 (Number of Farms, 1850-1950)"


def test_a_papers_year_is_not_the_year_of_a_work_it_cites() -> None:
    page1 = ("Preemptive Information Extraction using Unrestricted Relation Discovery\nYusuke Shinyama\n"
             "Abstract\nWe extend IE systems.\nExisting work learns patterns for relations (Riloff, 1996; Yangar-\n"
             "ber et al., 2000; Agichtein and Gravano, 2000; Sudo\net al., 2003). Brown et al. (2020) scale it.\n")
    title = "Preemptive Information Extraction using Unrestricted Relation Discovery"
    assert document_label(page1, largest=title) == f"\u201c{title}\u201d"
    # a year of the document itself still names it: a dated line first, else a year no citation gives
    assert document_label(page1 + "Proceedings of the Human Language Technology Conference 2006\n",
                          largest=title) == f"\u201c{title}\u201d (2006)"
    # a year in running text is no date of the document (a degree's, a founding's, a cited work's): no year
    report = "Annual Survey of Farms\nIn 2019, farm numbers fell (Smith, 2001).\n"
    assert document_label(report, largest="Annual Survey of Farms") == "\u201cAnnual Survey of Farms\u201d"
    assert document_label(report + "\u00a9 2020 County Office\n", largest="Annual Survey of Farms") == \
        "\u201cAnnual Survey of Farms\u201d (2020)"


def test_a_leading_mark_is_no_part_of_a_rows_name() -> None:
    assert plain("* Rita") == "Rita"
    assert plain("\u2020 Beta") == "Beta"
    assert plain("Net sales(2)") == "Net sales"
    assert plain("Sale of equity investments and other\u00b9") == "Sale of equity investments and other"
    assert plain("*") == "*"  # a cell that is only a mark stays what it is


# found on unseen 10-Qs (outside the shared corpus), as found: a company's running header, a note heading and values
# glued into a column name
NOTIONAL = "|  | October 30, 2022 | January 30, 2022 |\n|---|---|---|\n| Designated as cash flow hedges | $ 1,023 | $ 432 |\n" \
           "| Not designated for hedge accounting | $ 330 | $ 408 |"
NOTIONAL_BODY = "October 30,\n2022\nJanuary 30,\n2022\nDesignated as cash flow hedges\n$\n1,023\n$\n432\n" \
                "Not designated for hedge accounting\n$\n330\n$\n408"


def test_a_companys_running_header_is_no_title_and_the_table_below_presents_is_a_lead_in() -> None:
    header = "NVIDIA CORPORATION AND SUBSIDIARIES\nNOTES TO CONDENSED CONSOLIDATED FINANCIAL STATEMENTS\n(Unaudited)\n"
    assert table_name(NOTIONAL, header + "Note 11 - Derivative Financial Instruments\nWe enter into contracts.\n"
                      + NOTIONAL_BODY) == ""
    lead = ("These contracts were not designated for hedge accounting treatment.\nThe table below presents the notional "
            "value of our foreign currency forward contracts outstanding as of October 30, 2022 and January 30, 2022:\n")
    assert table_name(NOTIONAL, header + lead + NOTIONAL_BODY) == \
        "table of notional value of our foreign currency forward contracts outstanding"


def test_a_long_lead_in_loses_its_period_not_its_subject() -> None:
    md = "|  | Three Months Ended December 31, 2022 | Three Months Ended December 25, 2021 |\n|---|---|---|\n" \
         "| Net income | $ 29,998 | $ 34,630 |\n| Weighted-average basic shares outstanding | 15,892,723 | 16,391,724 |"
    page = ("Basis of Presentation and Preparation\nThe financial statements include the accounts of the Company.\n"
            "\nEarnings Per Share\n\nThe following table shows the computation of basic and diluted earnings per share for the "
            "three months ended December 31, 2022 and December 25, 2021 (net\nincome in millions and shares in thousands):\n\n"
            "Three Months Ended\nDecember 31,\n2022\nDecember 25,\n2021\nNet income\n$\n29,998\n$\n34,630\n")
    assert table_name(md, page) == "table of computation of basic and diluted earnings per share"


def test_values_glued_into_a_column_name_leave_the_table_without_questions() -> None:
    md = ("| Weighted-average remaining lease term – operating leases | December 31, 2022 11.6 years 10.3 years | "
          "June 30, 2023 11.5 years 11.3 years |\n|---|---|---|\n"
          "| Weighted-average discount rate – operating leases | 2.8 % | 3.1 % |\n"
          "| Weighted-average discount rate – finance leases | 2.3 % | 2.5 % |")
    assert table_grid(md).problem == "column names repeated or broken by text extraction"
    assert not table_grid(md.replace(" 11.6 years 10.3 years", "").replace(" 11.5 years 11.3 years", "")).problem


def test_a_title_is_never_taken_from_above_a_notes_or_items_heading() -> None:
    md = "|  | Three Months Ended Sep 30, 2023 | Three Months Ended Oct 1, 2022 |\n|---|---|---|\n" \
         "| Net income (loss) attributable to Intel | 297 | (1,018) |\n" \
         "| Earnings (loss) per share attributable to Intel—diluted | 0.07 | (0.25) |"
    body = "Three Months Ended\nSep 30, 2023\nOct 1, 2022\nNet income (loss) attributable to Intel\n297\n(1,018)\n" \
           "Earnings (loss) per share attributable to Intel—diluted\n0.07\n(0.25)\n"
    page = ("IMS Nanofabrication\n\nIn August 2023, we closed an agreement to sell a minority stake.\n\nNote 4 :\n"
            "Earnings (Loss) Per Share\nWe computed basic earnings per share on the weighted average shares.\n" + body)
    # "Earnings (Loss) Per Share" begins a row label, so it is read as the table's own cell; above "Note 4" is
    # another section's heading: no name rather than a wrong one
    assert table_name(md, page) == ""
    officers = "| Name | Age | Position with the Company |\n|---|---|---|\n| Corie S. Barry | 47 | Chief Executive Officer |\n" \
               "| Matt Bilunas | 50 | Chief Financial Officer |"
    page = ("Other Properties\n\nItem 4. Mine Safety Disclosures.\n\nNot applicable.\n\n"
            "Information about our Executive Officers\n(As of March 15, 2023)\n\nName\nAge\nPosition with the Company\n"
            "Corie S. Barry\n47\nChief Executive Officer\nMatt Bilunas\n50\nChief Financial Officer\n")
    assert table_name(officers, page) == "Information about our Executive Officers"


def test_the_unit_line_above_a_six_column_stacked_header_still_gives_the_scale() -> None:
    cols = [f"{n} Months Ended June 30, {y}" for n in ("Three", "Six", "Twelve") for y in (2022, 2023)]
    md = "|  | " + " | ".join(cols) + " |\n|" + "---|" * 7 + "\n| Net income (loss) | (2,028) | 6,750 | (5,872) | " \
         "9,922 | 1,063 | 15,023 |"
    header = []
    for n in ("Three", "Six", "Twelve"):
        header += [f"{n} Months Ended", "", "June 30,", ""]
    page = "\n".join(["AMAZON.COM, INC.", "CONSOLIDATED STATEMENTS OF CASH FLOWS", "(in millions)", "(unaudited)", "",
                      *header, "2022", "2023", "2022", "2023", "2022", "2023", "", "Net income (loss)", "$", "(2,028)"])
    assert table_scale(md, page) == 1e6


def test_the_rows_of_another_table_above_are_no_title() -> None:
    first = "|  |  |\n|---|---|\n| Acronym | Definition |\n| APG | Agency Priority Goal |\n| HI | Healthcare & Insurance |"
    second = "|  |  |\n|---|---|\n| Acronym | Definition |\n| HR | Human Resources |\n| HRS | Human Resources Solutions |"
    page = ("Annual Performance Report\nAcronyms\n\nAcronym\nDefinition\nAPG\nAgency Priority Goal\nHI\n"
            "Healthcare & Insurance\n\nAcronym\nDefinition\n\nHR\nHuman Resources\nHRS\nHuman Resources Solutions\n")
    # walking up from the second part, "Healthcare & Insurance" (above it "HI") is a row of the first part
    assert table_name(second, page, [first, second]) == ""
    # a page header read as a one-row table does not hide the statement's own title
    header = "|  |  |\n|---|---|\n| Financial Statements | Consolidated Condensed Statements of Cash Flows |"
    cash = "|  | Nine Months Ended Sep 30, 2023 | Oct 1, 2022 |\n|---|---|---|\n| Net income | 1,000 | 900 |\n" \
           "| Depreciation | 300 | 250 |"
    page = ("Financial Statements\nConsolidated Condensed Statements of Cash Flows\n\n"
            "Consolidated Condensed Statements of Cash Flows\n\nNine Months Ended\n\nSep 30, 2023\nOct 1, 2022\n"
            "Net income\n1,000\n900\nDepreciation\n300\n250\n")
    assert table_name(cash, page, [header, cash]) == "Consolidated Condensed Statements of Cash Flows"


def test_a_zero_line_is_no_section_heading_and_a_label_cut_after_its_dollar_sign_is_dropped() -> None:
    md = ("| | July 30, 2023 | January 29, 2023 |\n|---|---|---|\n| Total liabilities | 22,054 | 19,081 |\n"
          "| Shareholders\u2019 equity: |  |  |\n| Preferred stock | \u2014 | \u2014 |\n| Common stock | 2 | 2 |\n"
          "| Retained earnings | 14,921 | 10,171 |\n"
          "| Unrealized gains (losses), net of tax of $3, $(4), $31, and $ | (5) | (195) |")
    g = table_grid(md)
    assert g.heads["Common stock"] == "Shareholders\u2019 equity"
    assert g.row_phrase("Common stock") == "Common stock (under Shareholders\u2019 equity)"
    assert not any(r.startswith("Unrealized") for r, _, _ in g.cells)


def test_a_period_column_that_lost_its_day_beside_one_that_kept_it_is_broken() -> None:
    md = ("|  | Three Months Ended 2022 | Three Months Ended December 31, 2021 |\n|---|---|---|\n"
          "| Net realized gains (losses) on investments sold | $ (8) | $ 31 |\n| Impairments of investments | (9) | 0 |")
    assert table_grid(md).problem.startswith("a group header smeared over its columns, or a column name cut")
    fine = md.replace("Ended 2022", "Ended December 31, 2022")
    assert not table_grid(fine).problem
    assert not table_grid(fine.replace("December 31, ", "")).problem  # years alone in both: one convention


def test_a_filing_cover_without_the_registrant_caption_is_named_by_the_line_after_its_file_number() -> None:
    cover = ("UNITED STATES\nSECURITIES AND EXCHANGE COMMISSION\nWashington, D.C. 20549\n \nFORM 10-Q\n \n\u2612\n"
             "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934\n \n"
             "For the Quarterly Period Ended December 31, 2022\n \nOR\n"
             "For the Transition Period From                  to\nCommission File Number 001-37845\n \n"
             "MICROSOFT CORPORATION\n \n \nWASHINGTON\n \n91-1144442\n(STATE OF INCORPORATION)\n")
    assert document_label(cover, largest="FORM 10-Q") == \
        "the Form 10-Q of Microsoft Corporation for the quarterly period ended December 31, 2022"


def test_a_record_that_goes_on_in_the_next_row_and_a_wrapped_fragment_give_no_cell_but_a_subtotal_row_is_no_record() -> None:
    md = ("| Description | Type | Status | Start Date |\n|---|---|---|---|\n"
          "| Increase customer satisfaction. | Target | Increased | 10/1/2021 |\n|  | Actual | Met | 10/1/2021 |\n"
          "| Increase opportunities for | Target | Increased | 10/1/2021 |\n"
          "| persons with disabilities through GSA procurement. | Actual |  |  |\n"
          + "".join(f"| Goal {w} met on time | Target | Met | 10/1/2021 |\n" for w in ("one", "two", "three", "four",
                                                                                 "five", "six", "seven", "eight")))
    g = table_grid(md)
    assert not g.problem and {r for r, _, _ in g.cells} == {f"Goal {w} met on time" for w in (
        "one", "two", "three", "four", "five", "six", "seven", "eight")}
    fin = ("|  | June 30, 2023 | December 31, 2022 |\n|---|---|---|\n| U.S. government securities | 500 | 450 |\n"
           "| Other debt securities | 237 | 201 |\n|  | $ 737 | $ 651 |\n| Total marketable securities | 900 | 800 |")
    assert ("Other debt securities", "June 30, 2023", "237") in table_grid(fin).cells


def test_a_one_word_heading_after_a_paragraph_and_a_title_repeating_a_later_row_name_their_tables() -> None:
    inv = "|  | Jul 1, 2023 | Dec 31, 2022 |\n|---|---|---|\n| Raw materials | 1,300 | 1,517 |\n" \
          "| Work in process | 7,500 | 7,565 |\n| Finished goods | 3,000 | 4,142 |"
    page = ("Accounts Receivable\nWe sell certain of our accounts receivable on a non-recourse basis.\n"
            "After the sale, we remit payment to the third-party financial institution.\nInventories\n(In Millions)\n"
            "Jul 1, 2023\nDec 31, 2022\nRaw materials\n$\n1,300\n")
    assert table_name(inv, page) == "Inventories"
    # a header fragment or a word inside the table's header lines is no heading, and a heading with a paragraph
    # between it and the table names its section, not the table (these rows are inventories, not receivables)
    assert table_name(inv, page.replace("Inventories\n", "Trend\n").replace("institution.\n", "FY 2015-\n")) == ""
    fcf = ("|  | Twelve Months Ended March 31, 2022 | Twelve Months Ended March 31, 2023 |\n|---|---|---|\n"
           "| Net cash provided by (used in) operating activities | $ 39,324 | $ 54,330 |\n"
           "| Purchases of property and equipment | (61,053) | (58,321) |\n| Free cash flow | $ (21,729) | $ (3,991) |")
    page = ("Non-GAAP Financial Measures\nWe provide multiple measures of free cash flows.\nFree Cash Flow\n"
            "Free cash flow is cash flow from operations reduced by purchases of property and equipment.\n"
            "Twelve Months Ended\nMarch 31,\n2022\n2023\nNet cash provided by (used in) operating activities\n$\n39,324\n")
    assert table_name(fcf, page) == "Free Cash Flow"


def test_a_negative_printed_after_its_currency_sign_is_a_negative_number() -> None:
    assert [quantity(v) for v in ("$ (16)", "$(3)", "(49)", "$ 24,775", "$ \u2014")] == [-16.0, -3.0, -49.0, 24775.0, None]
    md = ("|  | June 30, 2023 | Acquisitions | Other | September 30, 2023 |\n|---|---|---|---|---|\n"
          "| Productivity and Business Processes | $ 24,775 | $ 0 | $ (16) | $ 24,759 |\n"
          "| Intelligent Cloud | 30,469 | 0 | (49) | 30,420 |\n| More Personal Computing | 12,642 | 0 | (31) | 12,611 |")
    g = table_grid(md)
    # by hand: the highest "Other" is (16), Productivity and Business Processes, not (31)
    other = {r: quantity(v) for r, c, v in g.cells if c == "Other"}
    assert max(other, key=other.__getitem__) == "Productivity and Business Processes"


def test_a_lead_in_clause_with_its_own_verb_names_no_table() -> None:
    md = "|  | Three Months Ended October 29, 2023 | Three Months Ended October 30, 2022 |\n|---|---|---|\n" \
         "| Research and development | 701 | 530 |\n| Sales, general and administrative | 240 | 183 |"
    page = ("Note 4 - Stock-Based Compensation\nOur stock-based compensation expense is associated with RSUs.\n"
            "Our Condensed Consolidated Statements of Income include stock-based compensation expense, net of amounts "
            "allocated to inventory, as\nfollows:\nThree Months Ended\nOctober 29,\n2023\nOctober 30,\n2022\n"
            "Research and development\n$\n701\n$\n530\n")
    # not "table of condensed Consolidated Statements of Income include ..." (a statement name, so an income
    # statement line to a reader across filings); the note's heading above ends the search
    assert table_name(md, page) == ""


def test_no_highest_row_where_a_cell_of_the_column_is_no_number_and_a_lead_ins_initials_keep_their_capitals() -> None:
    change = ("| Segment | 2022 | 2023 | % Change |\n|---|---|---|---|\n| North America | 1,200 | 1,500 | 25 % |\n"
              "| International | 100 | 1,100 | ** |\n| Cloud | 400 | 700 | 75 % |")
    outs = _bridges(change, T.STAFF, 30)
    # International's change is "not meaningful" (**), maybe the highest: no "highest % Change" question
    assert not any(isinstance(o, Written) and "highest % Change" in o.question for o in outs)
    md = "|  | 2019 | 2020 |\n|---|---|---|\n| U.S. | (4,926) | (6,946) |\n| Foreign | (3,507) | (385) |"
    page = ("The U.S. and foreign components of income (loss) before provision for income taxes are as follows (in "
            "millions):\n2019\n2020\nU.S.\n$\n(4,926)\n")
    assert table_name(md, page) == "table of U.S. and foreign components of income (loss) before provision for income taxes"


def test_a_statement_as_a_percentage_of_revenue_counts_shares_on_every_row() -> None:
    md = ("|  | Year Ended January 29, 2023 | January 30, 2022 |\n|---|---|---|\n| Revenue | 100.0 % | 100.0 % |\n"
          "| Cost of revenue | 43.1 | 35.1 |\n| Income from operations | 15.6 | 37.3 |\n| Net income | 16.2 % | 36.2 % |")
    g = table_grid(md)
    assert g.unit("15.6", "Income from operations", "Year Ended January 29, 2023") == "share"
    amounts = "|  | 2023 | 2022 |\n|---|---|---|\n| Income from operations | 4,224 | 10,041 |\n| Effective tax rate | 15.8 % | 16.0 % |"
    assert table_grid(amounts).unit("4,224", "Income from operations", "2023") != "share"  # one rate row changes nothing


def test_no_bridge_lands_on_the_base_line_of_a_percentage_statement() -> None:
    pro_forma = "| Item | 2021 |\n|---|---|\n| Revenue | 16,900 |\n| Net income | 4,200 |"
    shares = ("|  | 2023 | 2022 |\n|---|---|---|\n| Revenue | 100.0 % | 100.0 % |\n| Cost of revenue | 43.1 | 35.1 |\n"
              "| Net income | 16.2 % | 36.2 % |")
    outs = _bridges(pro_forma, shares, 20)
    # the highest row of the first table is Revenue; its line in the second is 100.0 % in every column
    assert not any(isinstance(o, Written) and o.answer.startswith("100.0") for o in outs)
