"""Every format's folder of every recipe's export holds each image it shows about once: the bytes it embeds (on
disk) plus the image files of the export, at most 1.3x the distinct image bytes its rows hold or name. An export
whose formats all embed their images keeps no images/ beside them (the fork's rows read from bytes were stored twice:
embedded and in an images/ nothing named)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.oracle_runs import oracle_runs
from vrag_data.config import ExportConfig
from vrag_data.export import export_run

BOUND = 1.3
CHUNK = 256  # a parquet column chunk's own headers (an empty images column takes ~190 bytes): allowed per chunk
# (format, verl image mode, --for): each format alone, and the fork's rows (embedded bytes)
EXPORTS = [("hf", "path", None), ("llamafactory", "path", None), ("verl", "path", None), ("easyr1", "path", None),
           ("verl", "bytes", "vragrl")]


def _walk(value, named: set[str], held: dict[str, int]) -> None:
    """Image values of one row: embedded bytes (distinct by content) and names of the export's images/ files."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "bytes" and isinstance(v, bytes):
                held[hashlib.sha256(v).hexdigest()] = len(v)
            else:
                _walk(v, named, held)
    elif isinstance(value, list):
        for v in value:
            _walk(v, named, held)
    elif isinstance(value, str) and value.startswith("images/"):
        named.add(value)


def _rows(path: Path) -> list:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    text = path.read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()] if path.suffix == ".jsonl" else [json.loads(text)]


def image_bytes(out: Path, fmt: str) -> dict[str, int]:
    """stored: embedded image bytes as written on disk (the parquet columns of the bytes) + every file of images/;
    distinct: per data file (each loads alone), the distinct images it embeds, plus the distinct files it names."""
    stored, chunks, held_distinct, named = 0, 0, 0, set()
    for path in sorted(p for p in (out / fmt).rglob("*") if p.suffix in (".parquet", ".json", ".jsonl")):
        held: dict[str, int] = {}
        for row in _rows(path):
            _walk(row, named, held)
        held_distinct += sum(held.values())
        if path.suffix == ".parquet":
            md = pq.read_metadata(path)
            cols = [md.row_group(g).column(c) for g in range(md.num_row_groups) for c in range(md.num_columns)]
            sizes = [c.total_compressed_size for c in cols if c.path_in_schema.endswith(".bytes")]
            stored, chunks = stored + sum(sizes), chunks + len(sizes)
    files = [p for p in (out / "images").iterdir() if p.is_file()] if (out / "images").is_dir() else []
    stored += sum(p.stat().st_size for p in files)
    by_content = {hashlib.sha256((out / n).read_bytes()).hexdigest(): (out / n).stat().st_size for n in named}
    return {"stored": stored, "distinct": held_distinct + sum(by_content.values()), "named": len(named), "chunks": chunks}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return oracle_runs(tmp_path_factory.mktemp("bytes") / "ws")


@pytest.mark.slow
def test_each_format_folder_holds_its_images_about_once(runs, tmp_path):
    ws, run_ids = runs
    seen: dict[tuple[str, str, str], dict[str, int]] = {}
    for recipe, run in run_ids.items():
        for fmt, mode, target in EXPORTS:
            if target == "vragrl" and recipe == "mmdoc_r1":
                continue  # refused (tests/test_export_for_vragrl_fork.py)
            out = tmp_path / f"{recipe}-{fmt}-{mode}"
            export_run(ws, run, [fmt], out, config=ExportConfig(image_mode=mode), target=target)
            m = seen[(recipe, fmt, mode)] = image_bytes(out, fmt)
            assert m["stored"] <= BOUND * m["distinct"] + CHUNK * m["chunks"], (recipe, fmt, mode, m)
            # images/ only when the rows name its files
            assert (out / "images").is_dir() == bool(m["named"]), (recipe, fmt, mode, m)
    # not vacuous: the embedded forms (hf, the fork's verl rows) and the named ones (LLaMA-Factory) hold images
    assert seen[("evisrag", "verl", "bytes")]["distinct"] > 0 and seen[("evisrag", "hf", "path")]["distinct"] > 0
    assert seen[("evisrag", "llamafactory", "path")]["named"] > 0
