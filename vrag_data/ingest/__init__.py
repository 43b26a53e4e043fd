"""PDF/image ingest: page images, text layer, layout blocks, tables, OCR, TOC (DESIGN.md "Contracts")."""

from vrag_data.ingest.discover import discover_inputs
from vrag_data.ingest.options import DocStats, IngestOptions, IngestSummary, MinerUSettings, PaddleOcrSettings
from vrag_data.ingest.pipeline import IngestFailed, check_components, ingest_paths

__all__ = [
    "DocStats",
    "IngestFailed",
    "IngestOptions",
    "IngestSummary",
    "MinerUSettings",
    "PaddleOcrSettings",
    "check_components",
    "discover_inputs",
    "ingest_paths",
]
