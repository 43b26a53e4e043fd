"""Issue 41, linked questions at a usable yield: two statements of one filing give a named ratio (return on assets:
net income over total assets, one fiscal year), and the same line item of two companies is weighed in dollars
even when the filings label it differently ("Net sales" / "Revenue"). Small synthetic statements; answers by hand."""

from __future__ import annotations

import json

from vrag_data.qgen.cross_doc import company
from vrag_data.qgen.evidence import Evidence, EvidencePool, Region
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.statement_items import concept
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.schema.records import Box, LayoutBlock, Page

ALPHA = "the Form 10-K of Alpha Corp for the fiscal year ended December 31, 2022"
BETA = "the Form 10-K of Beta Inc. for the fiscal year ended June 30, 2022"
GAMMA_Q = "the Form 10-Q of Gamma Inc. for the quarterly period ended June 30, 2022"
LABELS = {"alpha": ALPHA, "beta": BETA, "gamma": GAMMA_Q}

INCOME = """| Years ended December 31, | 2022 | 2021 |
|---|---|---|
| Net sales | 1,200 | 1,100 |
| Cost of sales | 700 | 650 |
| Net income | 150 | 120 |"""
BALANCE = """| | December 31, 2022 | December 31, 2021 |
|---|---|---|
| Inventories | 140 | 130 |
| Total assets | 2,000 | 1,600 |"""
CASH = """| Years ended December 31, | 2022 | 2021 |
|---|---|---|
| Net income | 150 | 120 |
| Purchases of property and equipment | (90) | (80) |"""
BETA_INCOME = """| For the years ended June 30, | 2022 | 2021 |
|---|---|---|
| Revenue | 900 | 950 |
| Net income | 60 | 80 |"""


def _region(md: str, stem: str, title: str, page: int, above: str = "(in millions)", tail: str = "") -> Region:
    cells = [c.strip() for line in md.splitlines()[2:] for c in line.strip("|").split("|")]
    text = "\n".join([title, above, *[c for c in cells if c], *tail.splitlines()])
    pg = Page(page_id=f"{stem}_{page}", doc_id=f"sha_{stem}", stem=stem, page=page, image=f"pages/{stem}_{page}.jpg",
              width=1000, height=1400, dpi=144, text=text, tables_md=[md])
    block = LayoutBlock(block_id=f"{pg.page_id}#0", doc_id=pg.doc_id, page_id=pg.page_id, page=page, cls="table",
                        bbox=Box.from_raw((50, 50, 900, 600), 1000, 1400), text=md, source="find_tables")
    return Region(block, pg, "table")


def _logic(kind: str, a: Region, b: Region, n: int = 30) -> list[Written | Rejected]:
    w = OracleWriter({}, LABELS)
    return [w.write_sync(Attempt(i, Evidence(kind, (a, b)), "logic")) for i in range(n)]


def test_line_items_are_read_from_the_whole_row_label() -> None:
    assert [concept(x) for x in ("Net earnings", "Total net sales", "Revenue", "Total assets", "Merchandise inventories",
                                 "Purchases of property and equipment", "Net cash provided by operating activities",
                                 "Total Best Buy Co., Inc. shareholders' equity", "Dividends paid(2)")] == [
        "net_income", "revenue", "revenue", "total_assets", "inventories", "capex", "operating_cash_flow", "equity",
        "dividends_paid"]
    # a line that only starts like one names another thing
    assert [concept(x) for x in ("Net sales by segment", "Total liabilities and equity", "Net income per share")] == [
        None, None, None]


def test_two_statements_of_one_filing_give_a_named_ratio_of_one_fiscal_year() -> None:
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    balance = _region(BALANCE, "alpha", "Consolidated Balance Sheets", 41)
    outs = [o for o in _logic("multi_page", income, balance) if isinstance(o, Written) and "divided by" in o.question]
    assert outs
    # by hand: return on assets 150 / 2,000 = 0.075 (2022), 120 / 1,600 = 0.075 (2021); asset turnover
    # 1,200 / 2,000 = 0.600, 1,100 / 1,600 = 0.6875 -> 0.688; inventory turnover 700 / 140 = 5.00, 650 / 130 = 5.00
    want = {("return on assets", "2022"): "0.075", ("return on assets", "2021"): "0.075",
            ("asset turnover", "2022"): "0.600", ("asset turnover", "2021"): "0.688",
            ("inventory turnover", "2022"): "5.00", ("inventory turnover", "2021"): "5.00"}
    seen = set()
    for o in outs:
        key = next(k for k in want if f"the {k[0]} for the fiscal year ending in {k[1]}" in o.question)
        assert o.answer == want[key], (o.question, o.answer)
        assert o.question.count(ALPHA) == 1  # the document named once, each table by its title and unit
        assert "Consolidated Statements of Income table (in millions)" in o.question
        assert "Consolidated Balance Sheets table (in millions)" in o.question
        assert len(o.hops) == 2 and {h.region for h in o.hops} == {0, 1}
        seen.add(key[0])
    assert seen == {"return on assets", "asset turnover", "inventory turnover"}


def test_an_outflow_is_used_as_its_size_and_the_question_says_so() -> None:
    cash = _region(CASH, "alpha", "Consolidated Statements of Cash Flows", 42)
    income = _region(INCOME.replace("\n| Net income | 150 | 120 |", ""), "alpha", "Consolidated Statements of Income", 40)
    outs = [o for o in _logic("multi_page", cash, income) if isinstance(o, Written) and "capital expenditures" in o.question]
    assert outs
    for o in outs:  # 90 / 1,200 = 0.075; 80 / 1,100 = 0.0727 -> 0.073
        assert o.answer in {"0.075", "0.073"} and "an outflow printed negative: use its size" in o.question


def test_a_quarterly_filings_balance_or_a_guarantor_statement_gives_no_ratio() -> None:
    income = _region(INCOME, "gamma", "Condensed Consolidated Statements of Income", 4)
    balance = _region(BALANCE, "gamma", "Condensed Consolidated Balance Sheets", 5)
    assert not any(isinstance(o, Written) and "divided by" in o.question for o in _logic("multi_page", income, balance))
    parent = _region(BALANCE, "alpha", "Parent Company Balance Sheets", 41)
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    assert not any(isinstance(o, Written) and "divided by" in o.question for o in _logic("multi_page", income, parent))


def test_one_line_item_of_two_companies_is_weighed_in_dollars() -> None:
    alpha = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    beta = _region(BETA_INCOME, "beta", "Consolidated Statements of Operations", 30, "(in thousands)")
    outs = [o for o in _logic("cross_doc", alpha, beta) if isinstance(o, Written)]
    assert outs
    # by hand, in dollars: Alpha's net sales 1,200 million vs Beta's revenue 900 thousand; net income 150 million
    # vs 60 thousand (2022); a ratio only between 0.01 and 100, so every question here asks which is higher
    for o in outs:
        assert o.question.startswith("Which company reported the higher") and o.answer == "Alpha Corp"
        assert ALPHA in o.question and BETA in o.question and "thousands" in o.question
    assert any("revenue" in o.question and "Net sales" in o.question and "Revenue" in o.question for o in outs)
    assert company("\u201cUlta Beauty Announces Fourth Quarter Fiscal 2022 Results\u201d (2023)") == "Ulta Beauty"
    assert company("\u201cTake A Step Back: Evoking Reasoning\u201d (2023)") == ""  # a paper names no company


def test_the_evidence_pool_pairs_statements_that_make_a_ratio() -> None:
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    balance = _region(BALANCE, "alpha", "Consolidated Balance Sheets", 41)
    beta = _region(BETA_INCOME, "beta", "Consolidated Statements of Operations", 30)
    pool = EvidencePool({"alpha": [income, balance], "beta": [beta]})
    # no row label is shared by the income statement and the balance sheet, yet they are linked (a named ratio)
    assert {(r.page_id, tuple(o.page_id for o in ps)) for r, ps in pool.doc_links()} == {
        ("alpha_40", ("alpha_41",)), ("alpha_41", ("alpha_40",))}
    # across documents: the same line item of one year ("Net sales" / "Revenue", 2022)
    assert {r.page_id: [o.page_id for o in ps] for r, ps in pool.cross_links()}["beta_30"] == ["alpha_40"]


def test_total_liabilities_and_equity_is_not_equity() -> None:
    assert concept("Total liabilities and stockholders\u2019 equity") is None
    assert concept("Total stockholders\u2019 equity") == "equity"


def test_the_same_label_in_two_companies_tables_is_one_line_only_in_the_same_statement() -> None:
    # "Marketing" of a stock-based compensation note is not the marketing expense of an income statement
    note = """| Years ended December 31, | 2022 | 2021 |
|---|---|---|
| Marketing | 300 | 250 |
| Technology and content | 900 | 800 |"""
    alpha = _region(note, "alpha", "Stock-Based Compensation Expense", 60)
    beta = _region(note.replace("300", "500"), "beta", "Consolidated Statements of Operations", 30)
    assert not any(isinstance(o, Written) for o in _logic("cross_doc", alpha, beta))
    same = _region(note, "alpha", "Consolidated Statements of Operations", 60)
    assert any(isinstance(o, Written) and "Marketing" in o.question for o in _logic("cross_doc", same, beta))


def test_within_one_filing_the_same_row_is_one_measure_only_under_one_column_measure() -> None:
    staff = """| | Number of Employees 2020 | Number of Employees 2021 |
|---|---|---|
| Canada | 48,000 | 50,000 |
| Mexico | 30,000 | 31,000 |"""
    stock = """| | 2020 | 2021 |
|---|---|---|
| Canada | 1,310 | 1,456 |
| Mexico | 700 | 730 |"""
    outs = _logic("multi_page", _region(staff, "alpha", "Human Capital", 6), _region(stock, "alpha", "Merchandise Inventories", 43))
    assert all(isinstance(o, Rejected) for o in outs)


def test_a_place_under_the_same_year_of_two_unrelated_tables_is_no_line() -> None:
    staff = """| | 2020 | 2021 |
|---|---|---|
| Canada | 48,000 | 50,000 |
| Mexico | 30,000 | 31,000 |"""
    stock = staff.replace("48,000", "1,310").replace("50,000", "1,456").replace("30,000", "700").replace("31,000", "730")
    outs = _logic("multi_page", _region(staff, "alpha", "Human Capital", 6), _region(stock, "alpha", "Merchandise Inventories", 43))
    assert all(isinstance(o, Rejected) for o in outs)
    # two tables of one measure (sales by region, the same year) do give the same place's difference or ratio
    sales = _logic("multi_page", _region(staff, "alpha", "Net Sales by Region", 6),
                   _region(stock, "alpha", "Online Net Sales", 43))
    assert any(isinstance(o, Written) and "Canada" in o.question for o in sales)


def test_a_segments_revenue_and_a_cash_flow_change_are_no_company_line_items() -> None:
    segment = _region(INCOME, "alpha", "Selected Financial Data for the International Segment", 27)
    balance = _region(BALANCE, "alpha", "Consolidated Balance Sheets", 41)
    assert not any(isinstance(o, Written) and "divided by" in o.question for o in _logic("multi_page", segment, balance))
    # "Inventories" in a cash-flow statement is the year's change, not the balance inventory turnover divides by
    flows = BALANCE.replace("| Total assets | 2,000 | 1,600 |\n", "")
    cash = _region(flows, "alpha", "Consolidated Statements of Cash Flows", 42)
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    assert not any(isinstance(o, Written) and "inventory turnover" in o.question for o in _logic("multi_page", income, cash))


def test_the_two_line_items_of_a_ratio_are_also_asked_for_as_printed() -> None:
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    balance = _region(BALANCE, "alpha", "Consolidated Balance Sheets", 41)
    w = OracleWriter({}, LABELS)
    outs = [w.write_sync(Attempt(i, Evidence("multi_page", (income, balance)), "extraction")) for i in range(16)]
    lists = [o for o in outs if isinstance(o, Written) and o.answer_format == "List"]
    assert lists
    for o in lists:  # by hand: each value as the statement prints it, in the order the question names them
        (_, ra, ca, va), (_, rb, cb, vb) = o.cells
        assert json.loads(o.answer) == [va, vb] and o.question.index(ra) < o.question.index(rb)
        assert {(ra, ca, va), (rb, cb, vb)} <= {("Net sales", "2022", "1,200"), ("Net sales", "2021", "1,100"),
                                               ("Cost of sales", "2022", "700"), ("Cost of sales", "2021", "650"),
                                               ("Net income", "2022", "150"), ("Net income", "2021", "120"),
                                               ("Inventories", "December 31, 2022", "140"),
                                               ("Inventories", "December 31, 2021", "130"),
                                               ("Total assets", "December 31, 2022", "2,000"),
                                               ("Total assets", "December 31, 2021", "1,600")}


def test_a_pair_of_filings_gives_one_question_whichever_is_drawn_first() -> None:
    alpha = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    beta = _region(BETA_INCOME, "beta", "Consolidated Statements of Operations", 30)
    w = OracleWriter({}, LABELS)
    for i in range(12):
        for qtype in ("logic", "extraction"):
            one = w.write_sync(Attempt(i, Evidence("cross_doc", (alpha, beta)), qtype))
            other = w.write_sync(Attempt(i, Evidence("cross_doc", (beta, alpha)), qtype))
            line_item = isinstance(one, Written) and ("divided by" in one.question or one.answer_format == "List")
            if line_item:  # a ratio of two companies' items, or both items as printed
                assert isinstance(other, Written) and other.question.index(ALPHA) < other.question.index(BETA)


def test_an_outflow_asked_for_as_printed_is_not_also_asked_for_as_its_size() -> None:
    cash = _region(CASH, "alpha", "Consolidated Statements of Cash Flows", 42)
    income = _region(INCOME.replace("\n| Net income | 150 | 120 |", ""), "alpha", "Consolidated Statements of Income", 40)
    w = OracleWriter({}, LABELS)
    lists = [o for i in range(16) for o in [w.write_sync(Attempt(i, Evidence("multi_page", (cash, income)), "extraction"))]
             if isinstance(o, Written) and o.answer_format == "List" and "capital" in o.question]
    assert lists and all("use its size" not in o.question and ("(90)" in o.answer or "(80)" in o.answer) for o in lists)


# found on unseen 10-Qs (outside the shared corpus): a quarterly filing's statements print three- and six-month flows
Q_OPS = """| | Three Months Ended June 30, 2023 | Three Months Ended June 30, 2022 | Six Months Ended June 30, 2023 | Six Months Ended June 30, 2022 |
|---|---|---|---|---|
| Total net sales | 134,383 | 121,234 | 261,741 | 237,678 |
| Net income (loss) | 6,750 | (2,028) | 9,922 | (5,872) |"""
Q_CASH = """| | Six Months Ended June 30, 2023 | Six Months Ended June 30, 2022 |
|---|---|---|
| Purchases of property and equipment | (25,662) | (30,675) |"""
Q_BALANCE = """| | June 30, 2023 | December 31, 2022 |
|---|---|---|
| Total assets | 477,607 | 462,675 |"""
DELTA_Q = "the Form 10-Q of Delta Corp for the quarterly period ended June 30, 2023"
EPSILON_Q = "the Form 10-Q of Epsilon Inc. for the quarterly period ended July 1, 2023"


def test_a_quarterly_filings_flows_of_one_period_make_a_ratio_and_a_quarters_flow_over_a_balance_none() -> None:
    LABELS["gamma"] = DELTA_Q.replace("Delta Corp", "Gamma Inc.")
    ops = _region(Q_OPS, "gamma", "Consolidated Statements of Operations", 4)
    cash = _region(Q_CASH, "gamma", "Consolidated Statements of Cash Flows", 3)
    outs = [o for o in _logic("multi_page", ops, cash) if isinstance(o, Written) and "divided by" in o.question]
    # by hand: capital expenditures over revenue, six months: 25,662 / 261,741 = 0.0980 (2023), 30,675 / 237,678 =
    # 0.1291 (2022); the cash-flow statement prints no three-month column, so no three-month ratio
    want = {"2023": "0.098", "2022": "0.129"}
    assert outs and {o.answer for o in outs} == {"0.098", "0.129"}
    for o in outs:
        year = "2023" if "2023: " in o.question else "2022"
        assert f"the ratio of capital expenditures to revenue for the six months ending on June 30, {year}:" in o.question
        assert o.answer == want[year] and "use its size" in o.question
    balance = _region(Q_BALANCE, "gamma", "Consolidated Balance Sheets", 5)
    assert not any(isinstance(o, Written) and "divided by" in o.question for o in _logic("multi_page", ops, balance))


def test_two_companies_interim_periods_are_weighed_only_when_they_end_on_one_date() -> None:
    LABELS.update(delta=DELTA_Q, epsilon=EPSILON_Q, zeta=DELTA_Q.replace("Delta Corp", "Zeta Corp"))
    delta = _region(Q_OPS, "delta", "Consolidated Statements of Operations", 4)
    zeta = _region(Q_OPS.replace("134,383", "99,000").replace("261,741", "190,500"), "zeta",
                   "Consolidated Statements of Operations", 6)
    outs = [o for o in _logic("cross_doc", delta, zeta, 60) if isinstance(o, Written) and "months ending" in o.question]
    assert outs
    # by hand: Delta 134,383 vs Zeta 99,000 (three months), 261,741 vs 190,500 (six months): Delta is higher;
    # the ratio 134,383 / 99,000 = 1.357, 261,741 / 190,500 = 1.374
    for o in outs:
        assert "ending on June 30, 2023" in o.question or "ending on June 30, 2022" in o.question
        if "divided by" in o.question and "revenue" in o.question and "June 30, 2023" in o.question:
            assert o.answer in ("1.36", "1.37")
    july = Q_OPS.replace("June 30", "July 1")
    epsilon = _region(july, "epsilon", "Consolidated Statements of Operations", 6)
    assert not any(isinstance(o, Written) for o in _logic("cross_doc", delta, epsilon))


def test_a_line_printed_with_its_loss_or_as_payments_for_acquisition_is_the_same_item() -> None:
    assert [concept(x) for x in ("Net income (loss)", "Operating income (loss)", "Income (loss) from operations",
                                 "Payments for acquisition of property, plant and equipment",
                                 "Net income (loss) attributable to Intel")] == [
        "net_income", "operating_income", "operating_income", "capex", "net_income"]
    assert concept("Net income (loss) per share") is None


def test_a_ratio_one_statement_prints_whole_is_no_two_table_question() -> None:
    # the income statement prints net income and net sales, the cash-flow statement net income and capital
    # expenditures: net margin needs one table only; capital expenditures over revenue needs both
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    cash = _region(CASH, "alpha", "Consolidated Statements of Cash Flows", 42)
    outs = [o for o in _logic("multi_page", income, cash, 40) if isinstance(o, Written) and "divided by" in o.question]
    assert outs and all("ratio of capital expenditures to revenue" in o.question for o in outs)
    # by hand: 90 / 1,200 = 0.075 (2022), 80 / 1,100 = 0.0727 -> 0.073 (2021)
    assert {o.answer for o in outs} <= {"0.075", "0.073"}
    w = OracleWriter({}, LABELS)
    pairs = [w.write_sync(Attempt(i, Evidence("multi_page", (income, cash)), "extraction")) for i in range(40)]
    assert not any(isinstance(o, Written) and "net income and the revenue" in o.question for o in pairs)


def test_a_ratio_whose_lines_one_page_prints_is_no_two_table_question_even_when_the_parser_missed_a_row() -> None:
    # the statement of operations as parsed stops before its net income line, which its page still prints
    ops = _region(Q_OPS.split("\n| Net income")[0], "gamma", "Consolidated Statements of Operations", 4,
                  tail="Net income (loss)\n$\n6,750")
    comp = _region("| | Three Months Ended June 30, 2023 | Three Months Ended June 30, 2022 |\n|---|---|---|\n"
                   "| Net income (loss) | 6,750 | (2,028) |\n| Total comprehensive income | 7,100 | (2,500) |", "gamma",
                   "Consolidated Statements of Comprehensive Income", 5)
    LABELS["gamma"] = DELTA_Q.replace("Delta Corp", "Gamma Inc.")
    outs = _logic("multi_page", ops, comp, 40)
    assert not any(isinstance(o, Written) and "net margin" in o.question for o in outs)
    # the same tables on a page without that line: net income 6,750 / revenue 134,383 = 0.0502 -> 0.050
    ops = _region(Q_OPS.split("\n| Net income")[0], "gamma", "Consolidated Statements of Operations", 4)
    margins = [o for o in _logic("multi_page", ops, comp, 40) if isinstance(o, Written) and "net margin" in o.question]
    assert margins and {o.answer for o in margins if "June 30, 2023:" in o.question} == {"0.050"}


def test_attempts_go_to_evidence_the_writer_can_write_for_and_not_back_to_evidence_it_declined() -> None:
    from vrag_data.qgen.picking import evidence_key as _evidence_key, fresh_pick as _fresh_pick
    income = _region(INCOME, "alpha", "Consolidated Statements of Income", 40)
    cash = _region(CASH, "alpha", "Consolidated Statements of Cash Flows", 42)
    other = _region("| | 2022 | 2021 |\n|---|---|---|\n| Employees | 1,200 | 1,100 |\n| Stores | 40 | 38 |", "alpha",
                    "Human Capital", 12)
    pool = EvidencePool({"alpha": [income, cash, other]})
    w = OracleWriter({}, LABELS)
    picks = [_fresh_pick(pool, "multi_page", "logic", f"s:{i}", set(), w.viable) for i in range(20)]
    # the only pair the templates can write a logic question for: capital expenditures over revenue
    assert all({r.page_id for r in ev.regions} == {"alpha_40", "alpha_42"} for ev in picks)
    assert all(w.viable(ev, "logic") for ev in picks)
    barren = {_evidence_key(picks[0], "logic")}
    again = [_fresh_pick(pool, "multi_page", "logic", f"s:{i}", barren) for i in range(20)]
    assert not any(_evidence_key(ev, "logic") in barren for ev in again)  # only when 24 draws find nothing else


def test_two_filings_interim_columns_are_one_period_only_when_they_end_on_one_day() -> None:
    from vrag_data.qgen.cross_doc import same_kind
    from vrag_data.qgen.grid import table_grid
    from vrag_data.qgen.table import Table
    ops = "|  | 2022 | 2021 |\n|---|---|---|\n| Research and development | 6,628 | 5,599 |\n| Net income | 17,556 | 20,505 |"
    msft = Table(table_grid(ops), "the Form 10-Q of Microsoft Corporation for the quarterly period ended September "
                 "30, 2022", 0, 1e6, "Three Months Ended September 30,", "Income Statements")
    intc = Table(table_grid(ops.replace("| 2022 | 2021 |", "| Three Months Ended Apr 2, 2022 | Three Months Ended "
                                        "Mar 26, 2021 |")),
                 "the Form 10-Q of Intel Corporation for the quarterly period ended April 1, 2023", 1, 1e6, "",
                 "Consolidated Condensed Statements of Income")
    amzn = Table(table_grid(ops.replace("| 2022 | 2021 |", "| Three Months Ended September 30, 2022 | Three Months "
                                        "Ended September 30, 2021 |")),
                 "the Form 10-Q of Amazon.com, Inc. for the quarterly period ended September 30, 2022", 1, 1e6, "",
                 "Consolidated Statements of Operations")
    # a quarter to September 30 (the day read from the lines above Microsoft's year columns) and one to April 2
    assert not same_kind(msft, "2022", intc, "Three Months Ended Apr 2, 2022")
    assert same_kind(msft, "2022", amzn, "Three Months Ended September 30, 2022")
