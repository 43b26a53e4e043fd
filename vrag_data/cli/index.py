"""`vrag-data index`: build the page search index of a workspace (BM25, or ColPali with local weights)."""

from __future__ import annotations

from enum import Enum

import typer

from vrag_data.cli.common import console, friendly_errors
from vrag_data.progress import stage_progress
from vrag_data.retrieve.build import build_index
from vrag_data.store import Workspace


class RetrieverName(str, Enum):
    bm25 = "bm25"
    colpali = "colpali"


def register(app: typer.Typer) -> None:
    @app.command("index")
    @friendly_errors
    def index_cmd(
        workspace: str = typer.Option(..., "-w", "--workspace", help="Workspace directory (or fsspec URL)."),
        retriever: RetrieverName = typer.Option(RetrieverName.bm25, "--retriever", help="bm25 or colpali."),
        model_path: str | None = typer.Option(None, "--model-path", help="Local ColPali/ColQwen checkpoint dir."),
        force: bool = typer.Option(False, "--force", help="Rebuild even when the pages did not change."),
    ) -> None:
        """Index every ingested page, corpus-wide and per document; skipped when nothing changed."""
        ws = Workspace(workspace)
        with stage_progress("index (documents)", None) as step:
            result = build_index(ws, retriever.value, model_path=model_path, force=force,
                                 progress=lambda done, total: step(completed=done, total=total))
        console.print(result.message, highlight=False)
