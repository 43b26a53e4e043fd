"""report.html: offline (no external references), escaped, and (with Chromium) rendered with crop boxes; the
`vrag-data report` command and the run summary other commands print."""

from __future__ import annotations

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
    # page images are referenced relative to the report, and exist there
    assert "'pages/' + encodeURIComponent(pageId) + '.jpg'" in text
    assert all((Path(built.ws.root) / "pages" / f"{p.page_id}.jpg").is_file() for p in built.pages)


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


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (apt-get install -y chromium for the rendering check)")
def test_html_renders_in_headless_chromium(built: Built, tmp_path: Path) -> None:
    crop_traj = next(t for t in built.trajectories if t.crops and t.run_id == "r1" and "aug" not in t.traj_id)
    url = Path(built.ws.report_html).resolve().as_uri() + f"#traj={crop_traj.traj_id}"
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "profile"),
            "--virtual-time-budget=3000"]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    # the viewer ran: the chosen trajectory's turns and its crop box are in the DOM, the injected text did not run
    assert "turn 0 · " in dom and crop_traj.traj_id in dom
    box = crop_traj.crops[0].box.raw
    assert re.search(rf'<rect x="{box[0]:g}" y="{box[1]:g}" width="{box[2] - box[0]:g}" height="{box[3] - box[1]:g}" class="crop"', dom)
    assert 'data-pwned="1"' not in dom and "<title>pwned</title>" not in dom
    shot = tmp_path / "report.png"
    subprocess.run([*base, "--window-size=1280,2400", f"--screenshot={shot}", url], capture_output=True, timeout=120)
    from PIL import Image

    img = Image.open(shot).convert("L")
    assert img.size == (1280, 2400)
    lo, hi = img.getextrema()
    assert hi - lo > 100  # not a blank page


@pytest.mark.skipif(shutil.which("duckdb") is None, reason="duckdb command-line client not on PATH (pip install duckdb-cli)")
def test_duckdb_cli_opens_the_report(built: Built) -> None:
    res = subprocess.run(["duckdb", "-readonly", "-csv", built.ws.report_db, "SELECT n FROM stage_funnel WHERE recipe = '(all)' AND stage = 'trajectories'"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["n", str(len(built.trajectories))]
