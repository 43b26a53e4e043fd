"""Settings and results of an ingest run (pydantic, `extra="forbid"`: a typo fails before any work)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.ids import config_hash
from vrag_data.schema.records import IngestError


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MinerUSettings(_Settings):
    """MinerU runs in its own environment (it pins against us). Either `python` (the interpreter of that
    environment; env `VRAG_MINERU_PYTHON`) or `url` (a MinerU API server; env `VRAG_MINERU_URL`)."""

    python: str | None = None
    url: str | None = None
    tier: Literal["flash", "basic", "standard", "advanced"] = "flash"
    timeout_s: float = 1800.0


class PaddleOcrSettings(_Settings):
    """PaddleOCR runs in its own environment through its CLI (env `VRAG_PADDLEOCR_CMD`) with local model
    folders (env `VRAG_PADDLEOCR_MODEL_DIR`, holding one `*det*` and one `*rec*` folder)."""

    command: str | None = None
    model_dir: str | None = None
    timeout_s: float = 1800.0


class IngestOptions(_Settings):
    dpi: int = Field(144, ge=36, le=600)
    layout: str = "pymupdf"  # a registered layout backend (vrag_data.ingest.backends: pymupdf, mineru, off, a plugin's),
    # checked where the ingest starts and by the config check (a settings model imports no registry)
    ocr: Literal["auto", "rapidocr", "paddleocr", "off"] = "auto"
    # pages per document; a longer one is cut with a notice naming the fix (a 5,000-page PDF costs ~0.4 CPU-s a page).
    # None = no cap, asked for explicitly in a config
    max_pages: int | None = Field(2000, ge=1)
    # wall-clock seconds one document may take; past it the remaining pages are left out with a notice (None = none)
    doc_time_budget_s: float | None = Field(1800.0, gt=0)
    workers: int = Field(2, ge=1)
    # a PDF with more pages than this is split into page ranges spread over the workers and stitched back
    # (one big document keeps every core busy); None = never split. Not with MinerU or PaddleOCR (per document).
    split_pages: int | None = Field(64, ge=2)
    strict: bool = False
    follow_symlinks: bool = False  # ingest files that symlinks in an input folder point to outside it
    # A page above this many pixels at the chosen dpi is not rendered (decompression bombs, posters, maps).
    max_page_pixels: int = Field(60_000_000, ge=10_000)
    jpeg_quality: int = Field(85, ge=30, le=100)
    # `--ocr auto` runs OCR on pages whose text layer has fewer non-space characters than this.
    ocr_min_chars: int = Field(40, ge=0)
    # onnxruntime threads per worker for OCR and the layout model; None = usable cores (CPU set) / workers running.
    ocr_threads: int | None = Field(None, ge=1)
    mineru: MinerUSettings = Field(default_factory=MinerUSettings)
    paddleocr: PaddleOcrSettings = Field(default_factory=PaddleOcrSettings)

    def output_hash(self, backend_keys: dict[str, object] | None = None) -> str:
        """Hash of the settings that change what lands in the workspace (not workers/strict/timeouts), with the layout
        backend's own (`vrag_data.ingest.backends.ingest_hash` passes them)."""
        keep = self.model_dump(include={"dpi", "layout", "ocr", "max_pages", "max_page_pixels", "jpeg_quality", "ocr_min_chars"})
        if self.doc_time_budget_s != 1800.0:  # a non-default budget can cut documents differently
            keep["doc_time_budget_s"] = self.doc_time_budget_s
        keep.update(backend_keys or {})
        return config_hash(keep)


class DocStats(_Settings):
    path: str
    stem: str
    doc_id: str = ""
    status: Literal["ingested", "unchanged", "failed"]
    n_pages: int = 0
    n_ocr_pages: int = 0
    n_layout_blocks: int = 0
    n_tables: int = 0
    n_errors: int = 0
    seconds: float = 0.0


class IngestSummary(_Settings):
    n_docs: int = 0  # documents ingested in this run
    n_pages: int = 0
    n_skipped_unchanged: int = 0
    errors: list[IngestError] = Field(default_factory=list)
    docs: list[DocStats] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """At least one document is usable (ingested now or already there)."""
        return self.n_docs + self.n_skipped_unchanged > 0
