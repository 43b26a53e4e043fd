"""Table questions, rules found by the fourth hand check (unseen 10-Ks and a product manual): a rate column holds
shares, not amounts; arithmetic across tables needs the same line under the same section; row labels equal but for
spacing name no single row; a table of text cells wrapped over several lines gives no question. Small synthetic
tables only."""

from __future__ import annotations

from tests.qgen.test_qgen_table_units_and_lists import _writes
from tests.qgen.test_qgen_tables import _region
from vrag_data.qgen.grid import table_grid
from vrag_data.qgen.writer import Rejected

DEFERRED = """| Item | 2022 | 2021 |
|---|---|---|
| Deferred tax assets | $12,301 | $11,258 |
| Valuation allowance | (3,162) | (2,423) |"""
RATES = """| Years ended December 31, | 2022 Amount | 2022 Rate | 2021 Amount | 2021 Rate |
|---|---|---|---|---|
| Federal statutory tax | ($1,054) | 21.0 % | ($1,057) | 21.0 % |
| Valuation allowance | 1,199 | (23.9) | 512 | (10.2) |"""


def test_a_rate_column_holds_shares_and_is_never_subtracted_from_an_amount():
    grid = table_grid(RATES)
    assert grid.unit("(10.2)", "Valuation allowance", "2021 Rate") == "share"
    assert grid.unit("512", "Valuation allowance", "2021 Amount") == "plain"
    outs = _writes((_region(DEFERRED, "report", 78), _region(RATES, "report", 77)), "multi_page", "logic", 12)
    assert all(isinstance(o, Rejected) or "Rate value" not in o.question for o in outs)
    assert any(not isinstance(o, Rejected) for o in outs)  # 2021 and 2021 Amount: both amounts of one line


def test_arithmetic_across_tables_needs_the_line_under_the_same_section():
    income = """| Year Ended December 31 | 2022 | 2021 |
|---|---|---|
| Net interest income | 9,895 | 7,750 |
| Provisions for credit losses |  |  |
| Card Member receivables | 627 | (73) |
| Card Member loans | 1,514 | (1,155) |"""
    balances = """| Item | 2022 | 2021 |
|---|---|---|
| Consumer | $ 22,885 | $ 22,392 |
| Card Member receivables | 57,613 | 53,645 |"""
    assert table_grid(income).sections["Card Member receivables"] == "provisions for credit losses"
    outs = _writes((_region(income, "report", 96), _region(balances, "report", 108)), "multi_page", "logic", 8)
    assert all(isinstance(o, Rejected) and o.reason == "writer_declined" for o in outs)


def test_row_labels_equal_but_for_spacing_name_no_single_row():
    text = """| Item | Pension | Derivatives |
|---|---|---|
| Net current period other comprehensive income / (loss) | 94 | (7) |
| Other comprehensive loss before reclassifications | (53) | (4) |
| Net current period other comprehensive income/(loss) | (50) | (1) |"""
    assert {r for r, _, _ in table_grid(text).cells} == {"Other comprehensive loss before reclassifications"}


def test_a_table_of_text_cells_wrapped_over_lines_gives_no_question():
    text = """| OBS Console | Dependency | Role/Policy Required |
|---|---|---|
| Operation |  |  |
| Listing existing | Domain Name | Domains:domains:getDetails |
| domain names | Service (DNS) |  |
| Configuring | Object | Tenant Administrator |
| mirroring back- | Storage |  |
| to-source rules | Service (OBS) |  |
| Deleting online | Object | Tenant Administrator |
| decompression | Storage |  |
| policies | Service (OBS) |  |"""
    assert "wrapped" in table_grid(text).problem
    cells = """| Tool | Description | How to Use |
|---|---|---|
| Console | Console is a web-based GUI for you to | Console Guide |
|  | easily manage resources. |  |
| Browser | Browser is a client that lets | Tool Guide |
|  | you manage resources from a PC. |  |"""
    assert "wrapped" in table_grid(cells).problem  # the description cells wrap: rows without a label go on
    unions = """| Union | Percent Represented | Status of the Agreements |
|---|---|---|
| The International Association of Machinists and | 20% | Two agreements; one expiring in 2024 |
| Aerospace Workers (IAM) |  | and one in July 2025. |
| The Society of Professional Engineering Employees in | 10% | Two agreements expiring in 2026. |
| Aerospace (SPEEA) |  |  |
| The United Automobile, Aerospace and Agricultural | 1% | One agreement expiring in April 2027. |
| Implement Workers of America (UAW) |  |  |"""
    assert "wrapped" in table_grid(unions).problem  # labels cut at a line wrap ("... and Agricultural")
    # a table whose labels start in capitals (or are product names such as "iPhone") is no such table
    ok = "| Product | 2023 |\n|---|---|\n| iPhone | 200 |\n| Mac | 29 |\n| Services | 85 |"
    assert not table_grid(ok).problem


def test_earnings_per_share_is_never_compared_with_an_amount():
    text = """| Item | 2022 | 2021 |
|---|---|---|
| Net income attributable to common shareholders | $ 7,400 | $ 7,950 |
| Diluted EPS | $ 9.85 | $ 10.02 |
| Basic earnings per common share | $ 9.86 | $ 10.04 |"""
    grid = table_grid(text)
    assert grid.unit("$ 9.85", "Diluted EPS") == grid.unit("$ 9.86", "Basic earnings per common share") == "per-share"
    for out in _writes((_region(text, "report", 149),), "single", "logic", 8):
        assert isinstance(out, Rejected) or "Net income" not in out.question
