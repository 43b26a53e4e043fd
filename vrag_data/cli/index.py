"""`vrag-data index`: build the page search index of a workspace (BM25, dense, hybrid, or ColPali with local
weights) and record it, with the query rewrites, as the workspace's index (`index/current.json`)."""

from __future__ import annotations

from enum import Enum

import typer

from vrag_data.cli.common import console, friendly_errors
from vrag_data.errors import VragError
from vrag_data.progress import stage_progress
from vrag_data.retrieve.build import build_index
from vrag_data.retrieve.normalize import QueryOptions
from vrag_data.store import Workspace


class RetrieverName(str, Enum):
    bm25 = "bm25"
    dense = "dense"
    hybrid = "hybrid"
    colpali = "colpali"


def _weights(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise VragError(f"--weight {item!r}: give NAME=NUMBER, e.g. --weight dense=2")
    return out


def register(app: typer.Typer) -> None:
    @app.command("index")
    @friendly_errors
    def index_cmd(
        workspace: str = typer.Option(..., "-w", "--workspace", help="Workspace directory (or fsspec URL)."),
        retriever: RetrieverName = typer.Option(RetrieverName.bm25, "--retriever",
                                                help="bm25, dense, hybrid (BM25 + dense fused) or colpali."),
        model_path: str | None = typer.Option(None, "--model-path", help="Local ColPali/ColQwen checkpoint dir."),
        dense_model: str | None = typer.Option(None, "--dense-model", help="Local sentence-transformers folder "
                                               "(e.g. BGE-M3); default: the bundled all-MiniLM-L6-v2."),
        weight: list[str] = typer.Option([], "--weight", help="Hybrid fusion weight NAME=NUMBER (repeatable)."),
        rrf_k: float = typer.Option(60.0, "--rrf-k", help="Reciprocal rank fusion constant."),
        normalize: bool = typer.Option(True, "--normalize/--no-normalize",
                                       help="Rewrite queries (answer-format clauses, FY2019, abbreviations, tickers, "
                                            "financial metrics) before they reach the index."),
        force: bool = typer.Option(False, "--force", help="Rebuild even when the pages did not change."),
    ) -> None:
        """Index every ingested page, corpus-wide and per document; skipped when nothing changed."""
        ws = Workspace(workspace)
        with stage_progress("index (documents)", None) as step:
            result = build_index(ws, retriever.value, model_path=model_path, force=force, dense_model=dense_model,
                                 weights=_weights(weight) or None, rrf_k=rrf_k,
                                 query=QueryOptions() if normalize else None,
                                 progress=lambda done, total: step(completed=done, total=total))
        console.print(result.message, highlight=False)
