"""`build_report`: workspace -> `report.duckdb` (tables + documented views) and `report.html`.

The database is built under a temporary name beside the target and renamed over it, so a reader (the
`duckdb` CLI, a notebook) sees the old report or the new one, never a half-built file. A workspace behind
an fsspec URL is built in a local temporary folder and uploaded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from vrag_data.progress import stage_progress
from vrag_data.report.answers import build_answers
from vrag_data.report.html import write_html
from vrag_data.report.tables import TABLE_DESCRIPTIONS, build_tables, step_count, table_counts
from vrag_data.report.views import VIEWS, create_views
from vrag_data.store import Workspace
from vrag_data.store.tempfiles import temp_name


STORAGE_COMPATIBILITY = "v1.2.0"


@dataclass
class ReportResult:
    db_path: str
    html_path: str
    runs: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # step -> (wall s, CPU s)


def populate(con: duckdb.DuckDBPyConnection, ws: Workspace, run: str | None = None,
             timings: dict[str, tuple[float, float]] | None = None) -> list[str]:
    """Tables, table comments and views in an open connection; returns the run ids reported on."""
    runs = build_tables(con, ws, run, timings)
    for name, desc in TABLE_DESCRIPTIONS.items():
        con.execute(f"COMMENT ON TABLE {name} IS '" + desc.replace("'", "''") + "'")
    create_views(con)
    build_answers(con)  # judge pass rate vs gold agreement: needs the rule scorers, so a table built in Python
    return [r.run_id for r in runs]


def _replace(tmp: Path, target: str, ws: Workspace) -> None:
    if ws.is_local:
        os.replace(tmp, target.removeprefix("file://"))  # atomic on POSIX
    else:
        ws.fs.put_file(str(tmp), target)


def build_report(ws: Workspace, run: str | None = None, *, html: bool = True, viewer_limit: int = 400,
                 threads: int | None = None, progress: bool = False) -> ReportResult:
    with stage_progress("report (steps)", step_count() + (3 if html else 2), enabled=progress) as step:
        return _build(ws, run, html, viewer_limit, threads, _Steps(step))


class _Steps(dict):
    """Step timings that also advance the progress line as each step finishes."""

    def __init__(self, step: Any) -> None:
        super().__init__()
        self.step = step

    def __setitem__(self, name: str, value: tuple[float, float]) -> None:
        super().__setitem__(name, value)
        self.step(info=name.split(" (")[0])


def _build(ws: Workspace, run: str | None, html: bool, viewer_limit: int, threads: int | None,
           timings: dict[str, tuple[float, float]]) -> ReportResult:
    t0 = time.perf_counter()
    if ws.is_local:
        root = Path(ws.root.removeprefix("file://"))
        root.mkdir(parents=True, exist_ok=True)
        work_dir = root
    else:
        work_dir = Path(tempfile.mkdtemp(prefix="vrag-report-"))
    tmp = Path(temp_name(work_dir / "report.duckdb", unique=True))  # a killed build's is swept by the next stage
    # the 1.x `duckdb` command-line client (what `pip install duckdb-cli` gives) must open the file
    # rows of a table have no meaningful order here: let DuckDB write them in parallel, in any order
    config: dict[str, object] = {"storage_compatibility_version": STORAGE_COMPATIBILITY, "preserve_insertion_order": False}
    if threads:
        config["threads"] = threads
    try:
        con = duckdb.connect(str(tmp), config=config)
        try:
            con.execute("BEGIN TRANSACTION")  # one commit: a commit per statement costs an fsync each
            runs = populate(con, ws, run, timings)
            with _timed(timings, "commit"):
                con.execute("COMMIT")
            counts = table_counts(con)
            html_path = ws.report_html
            if html:
                with _timed(timings, "html"):
                    write_html(con, ws, html_path, viewer_limit=viewer_limit, runs=runs)
            with _timed(timings, "checkpoint"):
                con.execute("CHECKPOINT")
        finally:
            con.close()
        _replace(tmp, ws.report_db, ws)
    finally:
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
        if not ws.is_local:
            shutil.rmtree(work_dir, ignore_errors=True)
    return ReportResult(ws.report_db, ws.report_html, runs, counts, time.perf_counter() - t0, dict(timings))


@contextlib.contextmanager
def _timed(timings: dict[str, tuple[float, float]], name: str) -> Iterator[None]:
    w, c = time.perf_counter(), time.process_time()
    yield
    timings[name] = (time.perf_counter() - w, time.process_time() - c)


def view_names() -> list[str]:
    return [v.name for v in VIEWS]
