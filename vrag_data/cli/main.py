"""`vrag-data` command line. Each sub-module registers its own commands."""

from __future__ import annotations

import importlib

import typer

import vrag_data.recipe.registry  # noqa: F401  - a run config may set the roles the registered recipes declare

app = typer.Typer(
    name="vrag-data",
    help="Build training data for agentic visual-RAG models, and train on it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# One module per command group; each exposes `register(app)`.
_COMMAND_MODULES = (
    "schemas",
    "ingest",
    "sample",
    "tasks",
    "index",
    "serve",
    "synth",
    "export",
    "report",
    "orchestrate",
    "train",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"vrag_data.cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
