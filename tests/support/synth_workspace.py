"""A small sample workspace for synthesis tests, built once per test session through the real CLI:
sample-corpus (2 documents) -> ingest (layout on, OCR off for speed) -> tasks import -> index."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vrag_data.cli.main import app

_DONE = "synth-ws.done"


def cli(*args: str) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, f"vrag-data {' '.join(map(str, args))} failed ({res.exit_code}): {res.output}"
    return res.output


def sample_workspace(base: Path) -> Path:
    """`base/synth-ws`, built on first use (reused by every test module of the session)."""
    ws = base / "synth-ws"
    marker = base / _DONE
    if marker.is_file():
        return ws
    corpus = base / "synth-corpus"
    cli("sample-corpus", corpus, "--docs", "2", "--seed", "0")
    cli("ingest", "-w", ws, corpus, "--ocr", "off", "--workers", "1", "--quiet")
    cli("tasks", "import", corpus / "qa.jsonl", "-w", ws)
    cli("index", "-w", ws)
    marker.write_text(json.dumps({"workspace": str(ws)}))
    return ws
