"""`vrag-data tasks report`: counts per kind, rejection causes and sampled tasks with their evidence crops, in one
static HTML page where everything from a document or a model is escaped."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner
import pytest

from tests.support.qgen_workspace import qgen_workspace
from vrag_data.cli.main import app
from vrag_data.qgen import generate_tasks, load_rejections
from vrag_data.qgen.report import tasks_report
from vrag_data.tasks.store import write_tasks
from vrag_data.tasks import load_tasks

# a module-wide fixture builds a workspace or serves for tens of seconds: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

HOSTILE = '<script>alert("x")</script> & <img src=y onerror=z> x < y <b>bold</b>'


def test_report_counts_rejections_and_crops(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    s = generate_tasks(ws, n=6, writer="oracle")
    tasks = load_tasks(ws)
    assert len(tasks) == s.stored >= 6
    # a question carrying markup (document text is untrusted): it must come out as text
    hostile = tasks[0].model_copy(update={"question": HOSTILE, "task_id": "t-hostile"})
    write_tasks(ws, "generated", [*tasks, hostile])
    rep = tasks_report(ws, str(tmp_path / "r.html"), sample=100)
    page = (tmp_path / "r.html").read_text()
    assert rep.tasks == rep.sampled == len(tasks) + 1
    assert sum(rep.by_kind.values()) == rep.tasks
    rejected = load_rejections(ws)
    assert sum(rep.rejected.values()) == len(rejected)
    for key in rep.rejected:  # every cause is listed with its count
        assert f"<td>{key}</td><td class=n>{rep.rejected[key]}</td>" in page
    # one crop per evidence box of every sampled task, all of them found in the workspace
    assert page.count("data:image/jpeg;base64,") == sum(len(t.evidence_boxes) for t in tasks) + len(hostile.evidence_boxes)
    assert rep.missing_images == 0
    assert "<script>" not in page and "onerror=z>" not in page
    # the stored question is inert (active HTML bracketed by the record), and what is left of markup is escaped
    assert "‹script›alert(&quot;x&quot;)‹/script› &amp; ‹img src=y onerror=z› x &lt; y ‹b›bold‹/b›" in page  # a <b> from outside is markup: inert
    assert "<b>bold" not in page
    assert "<script" not in page.lower()


def test_cli_report_samples_and_says_where(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    generate_tasks(ws, n=4, writer="oracle")
    r = CliRunner().invoke(app, ["tasks", "report", "-w", ws.root, "--sample", "2"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "2 sampled with crops" in out and "generated_report.html" in out
    page = Path(ws.tasks, "generated_report.html").read_text()
    assert len(re.findall(r"<section>", page)) == 2
    empty = CliRunner().invoke(app, ["tasks", "report", "-w", str(tmp_path / "none")])
    assert empty.exit_code != 0 and "no generated tasks" in empty.output and "Traceback" not in empty.output
