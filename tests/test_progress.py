"""Progress when stderr is not a terminal: plain lines with counts, rate and ETA, on a timer and at the end."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vrag_data.progress import LineProgress


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_line_progress_counts_rate_and_eta():
    out = io.StringIO()
    lines_seen = _Lines()  # on the progress logger itself: the Prefect layer turns its propagation off
    plog = logging.getLogger("vrag_data.progress")
    level = plog.level
    plog.setLevel(logging.INFO)  # setLevel, not the attribute: it clears the logger's cached isEnabledFor answers
    plog.addHandler(lines_seen)
    try:
        with LineProgress("ingest", every=0.0, stream=out) as p:
            t = p.add_task("ingest", total=4, pages=0)
            p.update(t, advance=1, pages=12)
            p.advance(t, 1)
    finally:
        plog.removeHandler(lines_seen)
        plog.setLevel(level)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ingest: 1/4 (25%)")  # no line before any progress
    assert any(x.startswith("ingest: 2/4 (50%)") and "/s" in x and "ETA" in x and "12" in x for x in lines)
    assert lines[-1].endswith("· done")
    assert any("ingest: 2/4" in r.getMessage() for r in lines_seen.records)  # the same lines reach the logs


@pytest.mark.slow
def test_synth_prints_progress_lines_when_stderr_is_a_pipe(tmp_path_factory):
    from tests.support.synth_workspace import sample_workspace

    ws = sample_workspace(tmp_path_factory.getbasetemp())
    exe = Path(sys.executable).parent / "vrag-data"
    r = subprocess.run([str(exe), "synth", "-w", str(ws), "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "2",
                        "--run", "progress-pipe"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("synth: ")]
    assert lines and "2/2 (100%)" in lines[-1] and lines[-1].endswith("done") and "/s" in lines[-1]


def test_stage_progress_as_lines_inside_an_orchestrator_task(capsys):
    """Inside `lines_only()` (a flow's task) a stage prints lines even when stderr would be a terminal."""
    from vrag_data.progress import lines_only, stage_progress

    with lines_only(), stage_progress("filter r1 (judged)", 3, every=0.0) as step:
        step()
        step(completed=3, info="loss 0.5000")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("filter r1 (judged): 1/3 (33%)") and "ETA" in err[0]
    assert err[-1].startswith("filter r1 (judged): 3/3 (100%)") and "loss 0.5000" in err[-1] and err[-1].endswith("· done")


@pytest.mark.slow
def test_index_and_filter_print_progress_lines_when_stderr_is_a_pipe(tmp_path_factory):
    from tests.support.synth_workspace import sample_workspace

    ws = sample_workspace(tmp_path_factory.getbasetemp())
    exe = Path(sys.executable).parent / "vrag-data"
    r = subprocess.run([str(exe), "index", "-w", str(ws), "--force"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("index (documents): ")]
    assert lines and lines[-1].endswith("done") and "(100%)" in lines[-1], r.stderr
    r = subprocess.run([str(exe), "synth", "-w", str(ws), "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "2",
                        "--run", "progress-filter"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe), "filter", "-w", str(ws), "--run", "progress-filter"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("filter progress-filter (judged): ")]
    assert lines and lines[-1].startswith("filter progress-filter (judged): 2/2 (100%)") and lines[-1].endswith("done"), r.stderr


def test_a_failed_stage_prints_no_done_line(capsys):
    import pytest

    from vrag_data.errors import VragError
    from vrag_data.progress import lines_only, stage_progress

    with pytest.raises(VragError), lines_only(), stage_progress("index (documents)", 4, every=3600) as step:
        step()
        raise VragError("no weights")
    assert capsys.readouterr().err == ""  # the stage's one-line error is all the user sees


def test_a_silent_stage_still_prints_a_line_on_time_and_no_done_when_interrupted():
    """No item finishes (the first document of an ingest, a slow endpoint): the heartbeat still writes a line every
    `every` seconds; Ctrl-C ends it with "stopped", not "done"."""
    import time

    import pytest

    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with LineProgress("ingest", every=0.2, stream=out) as p:
            p.add_task("ingest", total=3)
            time.sleep(1.5)
            try:
                raise KeyboardInterrupt
            finally:
                p.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[0].startswith("ingest: 0/3 (0%)") and "elapsed" in lines[0]
    assert lines[-1].endswith("· stopped") and not any(x.endswith("done") for x in lines)


@pytest.mark.slow
def test_one_long_document_moves_the_ingest_line_page_by_page(tmp_path):
    """A single document is ingested in the main process: its progress lines count its pages as they are done
    (`page k/n`, a fraction of the document), so a long one is never a run of '0/1' lines."""
    import re

    import pymupdf

    pdf = tmp_path / "long.pdf"
    doc = pymupdf.open()
    for i in range(40):
        doc.new_page().insert_text((72, 72), f"Page {i + 1} of a long report. " * 4)
    doc.save(pdf)
    exe = Path(sys.executable).parent / "vrag-data"
    env = {**os.environ, "VRAG_DATA_PROGRESS_EVERY": "0.01"}
    r = subprocess.run([str(exe), "ingest", str(pdf), "-w", str(tmp_path / "ws"), "--workers", "1", "--layout", "off",
                        "--ocr", "off"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    inside = [x for x in r.stderr.splitlines() if re.match(r"ingest: 0\.\d+/1 \(\d+%\)", x)]
    assert inside, r.stderr
    pages = [int(m.group(1)) for x in inside if (m := re.search(r"long page (\d+)/40", x))]
    assert pages and pages == sorted(pages) and pages[-1] < 41, r.stderr
    assert r.stderr.splitlines()[-3].startswith("ingest: 1/1 (100%)") or "ingest: 1/1 (100%)" in r.stderr


@pytest.mark.slow
def test_a_bad_progress_interval_is_one_line(tmp_path):
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "one page")
    doc.save(tmp_path / "one.pdf")
    exe = Path(sys.executable).parent / "vrag-data"
    r = subprocess.run([str(exe), "ingest", str(tmp_path / "one.pdf"), "-w", str(tmp_path / "ws")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "VRAG_DATA_PROGRESS_EVERY": "soon"})
    assert r.returncode == 2, r.stderr
    assert "VRAG_DATA_PROGRESS_EVERY='soon'" in r.stderr and "Traceback" not in r.stderr
