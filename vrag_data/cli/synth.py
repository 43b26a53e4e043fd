"""CLI commands (not yet implemented)."""

import typer


def register(app: typer.Typer) -> None:  # filled in by the stage that owns this command
    return None
