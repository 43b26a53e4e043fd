"""`vrag-data schemas dump|check`."""

from __future__ import annotations

from pathlib import Path

import typer

from vrag_data.cli.common import console, fail
from vrag_data.schema.dump import drifted, dump

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "schemas"


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="JSON Schemas generated from the records.", no_args_is_help=True)

    @sub.command("dump")
    def dump_cmd(out: Path = typer.Option(DEFAULT_DIR, "--out", help="Folder for <name>.schema.json")) -> None:
        """Write one JSON Schema per record."""
        for p in dump(out):
            console.print(f"wrote {p}")

    @sub.command("check")
    def check_cmd(out: Path = typer.Option(DEFAULT_DIR, "--out")) -> None:
        """Exit 1 and name the file when a record and its JSON Schema differ."""
        bad = drifted(out)
        if bad:
            fail(f"schema drift in {', '.join(bad)}; run `vrag-data schemas dump`", 1)
        console.print(f"schemas up to date ({out})")

    app.add_typer(sub, name="schemas")
