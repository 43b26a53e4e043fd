"""Code version: recorded in provenance and used in cache keys."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__version__ = "0.1.0"


@functools.cache
def code_version() -> str:
    """Package version plus a hash of the source files, so a code change invalidates cached stage results."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pkg in ("vrag_data", "pipelines", "flows"):
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:10]}"
