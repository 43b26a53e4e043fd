"""PDF/image ingest: page images, text layer, layout blocks, tables, OCR, TOC (DESIGN.md "Contracts").

Names are imported on first use, so that reading the settings model (`vrag_data.ingest.options`, which the run
config builds on) does not load PyMuPDF and the layout model."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "discover_inputs": "vrag_data.ingest.discover",
    "DocStats": "vrag_data.ingest.options",
    "IngestOptions": "vrag_data.ingest.options",
    "IngestSummary": "vrag_data.ingest.options",
    "MinerUSettings": "vrag_data.ingest.options",
    "PaddleOcrSettings": "vrag_data.ingest.options",
    "IngestFailed": "vrag_data.ingest.pipeline",
    "check_components": "vrag_data.ingest.pipeline",
    "ingest_paths": "vrag_data.ingest.pipeline",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
