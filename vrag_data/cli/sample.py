"""`vrag-data sample-corpus OUT --docs N --seed S`: the deterministic synthetic corpus with gold boxes."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vrag_data.cli.common import console, friendly_errors


def register(app: typer.Typer) -> None:
    @app.command("sample-corpus")
    @friendly_errors
    def sample_corpus(
        out: Path = typer.Argument(..., help="Output folder for the PDFs, qa.jsonl and MANIFEST.json"),
        docs: int = typer.Option(6, "--docs", min=1, help="Number of documents (reports and slide decks)"),
        seed: int = typer.Option(0, "--seed", help="Same seed -> byte-identical files"),
    ) -> None:
        """Write synthetic PDFs (charts, tables, text, image-only pages) and questions with gold evidence boxes."""
        from vrag_data.sample import make_sample_corpus

        with Progress(TextColumn("sample corpus"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            bar = progress.add_task("docs", total=docs)
            corpus = make_sample_corpus(out, docs=docs, seed=seed, on_doc=lambda _d: progress.advance(bar))
        console.print(f"wrote {len(corpus.paths)} PDFs, {corpus.n_questions} questions ({corpus.qa_path}) "
                      f"and {corpus.manifest_path}")
