"""`vrag-data ingest PATH... -w WORKSPACE`: PDFs and images -> page images + corpus tables."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import get_args

import typer

from vrag_data.cli.common import console, friendly_errors
from vrag_data.ingest.options import IngestOptions, MinerUSettings


def _choices(name: str, annotation: object) -> type[Enum]:
    """A CLI choice enum from a settings model's `Literal` (the settings model is the one source of the values)."""
    return Enum(name, {v: v for v in get_args(annotation)}, type=str)  # type: ignore[return-value]


OcrChoice = _choices("OcrChoice", IngestOptions.model_fields["ocr"].annotation)
TierChoice = _choices("TierChoice", MinerUSettings.model_fields["tier"].annotation)


def register(app: typer.Typer) -> None:
    @app.command("ingest")
    @friendly_errors
    def ingest_cmd(
        paths: list[str] = typer.Argument(..., help="PDFs, images (png/jpg/tiff) or folders of them."),
        workspace: Path = typer.Option(..., "--workspace", "-w", help="Workspace folder (created if missing)."),
        dpi: int = typer.Option(144, "--dpi", min=36, max=600, help="Render resolution of page images."),
        layout: str = typer.Option("pymupdf", "--layout", help="Layout backend: pymupdf (PyMuPDF's bundled model), mineru (out of process), off, or one a plugin registers."),
        ocr: OcrChoice = typer.Option(OcrChoice.auto, "--ocr", help="auto = RapidOCR on pages without a usable text layer; rapidocr/paddleocr = every page."),
        max_pages: int = typer.Option(2000, "--max-pages", min=1, help="Only the first N pages of each document (longer ones are cut with a notice)."),
        workers: int = typer.Option(2, "--workers", min=1, help="Documents processed in parallel (processes)."),
        strict: bool = typer.Option(False, "--strict", help="Stop at the first bad file or page (exit 2)."),
        max_page_pixels: int = typer.Option(60_000_000, "--max-page-pixels", min=10_000, help="Pages above this pixel count are refused."),
        mineru_tier: TierChoice = typer.Option(TierChoice.flash, "--mineru-tier", help="MinerU tier; all but flash need local models under MINERU_HOME."),
        follow_symlinks: bool = typer.Option(False, "--follow-symlinks", help="Ingest files that symlinks in an input folder point to outside it."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ) -> None:
        """Render pages to JPEG and extract text layer, layout blocks, tables, OCR lines and a TOC."""
        from vrag_data.ingest import ingest_paths
        from vrag_data.store.workspace import Workspace

        from vrag_data.config import ConfigError
        from vrag_data.ingest.backends import get_backend

        try:
            get_backend(layout)
        except ValueError as err:
            raise ConfigError(f"--layout: {err}") from None
        opts = IngestOptions(
            dpi=dpi, layout=layout, ocr=ocr.value, max_pages=max_pages, workers=workers, strict=strict,
            max_page_pixels=max_page_pixels, mineru=MinerUSettings(tier=mineru_tier.value), follow_symlinks=follow_symlinks,
        )
        summary = ingest_paths(paths, Workspace(str(workspace)), opts, progress=not quiet)
        for err in summary.errors:
            where = f" page {err.page}" if err.page else ""
            label = "[dim]note[/]" if err.stage == "notice" else "[yellow]skipped[/]"  # notices: kept, something ignored
            console.print(f"{label} {err.path}{where}: {err.reason}", highlight=False, soft_wrap=True)
        # a notice (JavaScript not run, a page cap) is something ignored in a kept document, not an error
        n_notices = sum(1 for e in summary.errors if e.stage == "notice")
        n_errors = len(summary.errors) - n_notices
        console.print(
            f"ingested {summary.n_docs} document(s), {summary.n_pages} page(s); {summary.n_skipped_unchanged} unchanged; "
            f"{n_errors} error(s), {n_notices} notice(s) (see {workspace}/corpus/errors.parquet) in {summary.seconds:.1f}s",
            highlight=False,
        )
        if not summary.ok:
            raise typer.Exit(2)
