"""An ingested sample-corpus workspace for the question-generation tests, built once per test process.

Real ingest (PyMuPDF rendering, text layer, layout model, find_tables; OCR off to stay fast: the
image-only memo pages then have no blocks) and a real BM25 index. Tests copy it, never write into it."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

from vrag_data.ingest import IngestOptions, ingest_paths
from vrag_data.retrieve import build_index
from vrag_data.sample import make_sample_corpus
from vrag_data.store import Workspace

DOCS, SEED = 3, 3


@functools.cache
def _built() -> Path:
    root = Path(tempfile.mkdtemp(prefix="vrag-qgen-"))
    corpus = make_sample_corpus(root / "corpus", docs=DOCS, seed=SEED)
    ws = Workspace(str(root / "ws"))
    ingest_paths([str(p) for p in corpus.paths], ws, IngestOptions(layout="pymupdf", ocr="off", workers=2),
                 progress=False)
    build_index(ws)
    return root


def qgen_workspace(dest: Path) -> Workspace:
    """A private copy of the ingested workspace (its documents still point at the shared sample PDFs)."""
    shutil.copytree(_built() / "ws", dest)
    return Workspace(str(dest))
