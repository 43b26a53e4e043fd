"""report.html: self-contained (no external references, pictures embedded), escaped, and rendered in Chromium with
KPIs, funnel and crop boxes when copied alone; the
`vrag-data report` command and the run summary other commands print."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.report_fixtures import XSS, Built, build_report_workspace
from vrag_data.cli.main import app
from vrag_data.report import VIEWS, build_report, print_run_summary

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    b = build_report_workspace(tmp_path_factory.mktemp("report_html") / "ws")
    build_report(b.ws)
    return b


def test_html_has_no_external_references(built: Built) -> None:
    text = Path(built.ws.report_html).read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert not re.search(r"<link\b|@import|url\(\s*['\"]?(https?:)?//|<iframe", text, re.I)
    assert "fetch(" not in text and "XMLHttpRequest" not in text
    # self-contained: no relative image paths; every page the viewer shows is an embedded thumbnail
    assert "pages/" not in text.split('id="viewer-data">', 1)[1].split("</script>", 1)[0].replace('"pages":', "")
    assert "encodeURIComponent(pageId) + '.jpg'" not in text
    data = json.loads(re.search(r'id="viewer-data">(.*?)</script>', text, re.S).group(1))
    assert data["pages"] and set(data["thumbs"]) == set(data["pages"]) and not data["missing"]
    assert all(u.startswith("data:image/jpeg;base64,") for u in data["thumbs"].values())


def test_html_escapes_document_and_model_text(built: Built) -> None:
    text = Path(built.ws.report_html).read_text(encoding="utf-8")
    assert XSS not in text
    assert "<img src=x" not in text and 'document.title="pwned"</script>' not in text
    # exactly the page's own script blocks: the JSON data block and the viewer
    assert len(re.findall(r"<script\b", text)) == 2
    assert text.count("</script>") == 2
    # the text is still there for the viewer, as escaped JSON
    assert "\\u003cscript\\u003edocument.title" in text


def test_rerun_replaces_the_database_in_place(tmp_path: Path) -> None:
    b = build_report_workspace(tmp_path / "ws")
    build_report(b.ws)
    reader = duckdb.connect(b.ws.report_db, read_only=True)  # a reader holding the old file open
    try:
        before = reader.execute("SELECT count(*) FROM trajectories").fetchone()[0]
        (Path(b.ws.run("r2")) / "trajectories" / "part-000002.parquet").unlink()
        build_report(b.ws)
        assert reader.execute("SELECT count(*) FROM trajectories").fetchone()[0] == before  # old snapshot intact
    finally:
        reader.close()
    with duckdb.connect(b.ws.report_db, read_only=True) as c:
        after = c.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    assert after < before
    assert not [p.name for p in Path(b.ws.root).iterdir() if p.name.startswith(".tmp-")]


def test_report_cli_describe_and_summary(built: Built) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["report", "--describe"])
    assert res.exit_code == 0, res.output
    for v in VIEWS:
        assert f"  {v.name}: " in res.output
    res = runner.invoke(app, ["report", "-w", built.ws.root, "--run", "r1"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "report.duckdb" in out and "vrag_rl" in out and "visor" not in out.split("html:")[1]
    res = runner.invoke(app, ["report", "-w", built.ws.root, "--run", "nope"])
    assert res.exit_code != 0 and "run not found" in res.output and "Traceback" not in res.output
    build_report(built.ws)  # leave the full report for the other tests


def test_print_run_summary(built: Built) -> None:
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    rows = print_run_summary(built.ws, "r1", Console(file=buf, width=160))
    trajs = [t for t in built.trajectories if t.run_id == "r1"]
    assert [r["recipe"] for r in rows] == ["vrag_rl"]
    r = rows[0]
    assert r["trajectories"] == len(trajs)
    assert r["finish_rate"] == pytest.approx(sum(t.status == "answered" for t in trajs) / len(trajs))
    assert r["exported"] == built.exported["vrag_rl"]
    assert "vrag_rl" in buf.getvalue() and "run r1" in buf.getvalue()


@pytest.mark.heavy
def test_a_copied_report_in_a_real_browser(built: Built, tmp_path: Path) -> None:
    """report.html copied ALONE to an empty folder, opened in Chromium: KPIs equal to the database, the funnel,
    and a trajectory's page with its crop box drawn over an embedded picture; the injected text did not run."""
    from tests.support.browser import browser_page, keep_screenshot

    alone = tmp_path / "mailed"
    alone.mkdir()
    shutil.copy(built.ws.report_html, alone / "report.html")
    crop_traj = next(t for t in built.trajectories if t.crops and t.run_id == "r1" and "aug" not in t.traj_id)
    with duckdb.connect(built.ws.report_db, read_only=True) as con:
        n_traj, n_pages, n_tasks = (con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("trajectories", "pages", "tasks"))
        funnel = dict(con.execute("SELECT stage, n FROM stage_funnel WHERE recipe = '(all)'").fetchall())
    with browser_page(1280, 1600) as page:
        failed: list[str] = []
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto((alone / "report.html").as_uri() + f"#traj={crop_traj.traj_id}")
        kpis = dict(t.split("\n", 1) for t in page.locator(".kpi").all_inner_texts())
        assert kpis["trajectories"] == f"{n_traj:,}" and kpis["pages"] == f"{n_pages:,}" and kpis["tasks"] == f"{n_tasks:,}"
        assert kpis["policy"] and "oracle" in page.inner_text("body")  # the fixture's runs are the oracle's
        chart = page.locator("svg.chart", has_text="funnel: (all)")
        assert chart.count() == 1 and f"{funnel['trajectories']:,}" in chart.text_content()
        page.get_by_text("turn 0 · ").first.wait_for()
        heading = page.locator("#traj-detail h3").inner_text()
        assert f"policy {crop_traj.provenance.policy}" in heading and crop_traj.traj_id in heading
        box = crop_traj.crops[0].box.raw
        rect = page.locator(f'#traj-detail rect.crop[x="{box[0]:g}"][y="{box[1]:g}"]').first
        assert rect.get_attribute("width") == f"{box[2] - box[0]:g}" and rect.get_attribute("height") == f"{box[3] - box[1]:g}"
        svg = rect.locator("xpath=..")
        href = svg.locator("image").first.get_attribute("href")
        assert href.startswith("data:image/jpeg;base64,")
        # the picture decoded in the browser (a broken data URI renders nothing)
        assert page.evaluate("""h => new Promise(ok => { const i = new Image(); i.onload = () => ok(i.naturalWidth);
                                    i.onerror = () => ok(0); i.src = h; })""", href) > 0
        assert page.locator("#traj-detail p.missing").count() == 0
        assert page.evaluate("document.title") != "pwned" and page.locator("[data-pwned]").count() == 0
        rect.scroll_into_view_if_needed()
        keep_screenshot(page, "report-viewer-crop")
    assert not failed, failed  # nothing was fetched from outside the file


@pytest.mark.skipif(shutil.which("duckdb") is None, reason="duckdb command-line client not on PATH (pip install duckdb-cli)")
def test_duckdb_cli_opens_the_report(built: Built) -> None:
    res = subprocess.run(["duckdb", "-readonly", "-csv", built.ws.report_db, "SELECT n FROM stage_funnel WHERE recipe = '(all)' AND stage = 'trajectories'"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["n", str(len(built.trajectories))]
