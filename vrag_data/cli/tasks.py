"""`vrag-data tasks ...`: task import (and generation, added by its own stage) into the workspace.

The group lives at module level (`tasks_app`) so other stages add commands with `@tasks_app.command(...)`."""

from __future__ import annotations

from pathlib import Path

import typer

from vrag_data.cli.common import console, fail, friendly_errors
from vrag_data.tasks.formats import FORMATS

tasks_app = typer.Typer(help="Tasks (questions with gold answers and evidence) in the workspace.",
                        no_args_is_help=True)

MAX_SHOWN_ERRORS = 20


@tasks_app.command("import")
@friendly_errors
def import_cmd(
    file: str = typer.Argument(..., help="Annotation file (.json or .jsonl) of a benchmark"),
    workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace with ingested documents"),
    fmt: str = typer.Option("corpus", "--format", help=f"One of: {', '.join(FORMATS)}"),
    split: str = typer.Option("train", "--split", help="Split label stored on every task"),
    benchmark: str = typer.Option(None, "--benchmark", help="Override the benchmark name stored on the tasks"),
) -> None:
    """Map a benchmark's QA rows to Task records (tasks/<file-stem>.parquet); bad rows are reported and skipped."""
    from vrag_data.store import Workspace
    from vrag_data.tasks import import_tasks

    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; use one of: {', '.join(FORMATS)}", 2)
    summary = import_tasks(file, Workspace(str(workspace)), fmt, split=split, benchmark=benchmark)
    for line in summary.errors[:MAX_SHOWN_ERRORS]:
        console.print(f"[yellow]skipped[/] {line}", highlight=False, soft_wrap=True)
    if len(summary.errors) > MAX_SHOWN_ERRORS:
        console.print(f"... and {len(summary.errors) - MAX_SHOWN_ERRORS} more (tasks/import_errors.parquet)")
    hops = ", ".join(f"{k} {v}" for k, v in summary.by_hop.items()) or "none"
    console.print(f"imported {summary.imported} of {summary.rows} rows into {summary.shard} ({hops}); "
                  f"skipped {summary.skipped}, duplicates {summary.duplicates}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
