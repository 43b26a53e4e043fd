"""Every format's folder of every recipe's export holds each image it shows about once: the bytes it embeds (on
disk) plus the image files it holds or names, at most 1.3x the distinct image bytes of the whole folder (not of each
data file: a page that the SFT and RL configs, or the train and test splits, both show counts once). An export whose
formats all embed their images keeps no images/ beside them (the fork's rows read from bytes were stored twice:
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
from vrag_data.schema.records import Task
from vrag_data.store.shards import read_records, write_records

BOUND = 1.3
CHUNK = 256  # a parquet column chunk's own headers (an empty images column takes ~190 bytes): allowed per chunk
# (format, verl image mode, --for): each format alone, and the fork's rows (embedded bytes)
EXPORTS = [("hf", "path", None), ("llamafactory", "path", None), ("verl", "path", None), ("easyr1", "path", None),
           ("verl", "bytes", "vragrl")]


def _walk(value, named: set[str], held: dict[str, int]) -> None:
    """Image values of one row: embedded bytes (distinct by content) and names of image files (`images/<hash>.jpg`)."""
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


def image_bytes(out: Path, fmt: str, per_file: bool = False) -> dict[str, int]:
    """stored: embedded image bytes as written on disk (the parquet columns of the bytes) + the image files the format's
    folder holds + the export's images/ when its rows name them; distinct: the distinct images (by content) of all
    of it, the whole folder at once (`per_file`: the distinct embedded images of each data file, summed)."""
    stored, chunks, held, files, per_file_bytes = 0, 0, {}, set(), 0
    for path in sorted(p for p in (out / fmt).rglob("*") if p.suffix in (".parquet", ".json", ".jsonl")):
        named: set[str] = set()
        own: dict[str, int] = {}
        for row in _rows(path):
            _walk(row, named, own)
        held.update(own)
        per_file_bytes += sum(own.values())
        # a name is relative to the data file's folder (an HF image folder) or else to the export folder
        files |= {(path.parent / n) if (path.parent / n).is_file() else (out / n) for n in named}
        if path.suffix == ".parquet":
            md = pq.read_metadata(path)
            cols = [md.row_group(g).column(c) for g in range(md.num_row_groups) for c in range(md.num_columns)]
            sizes = [c.total_compressed_size for c in cols if c.path_in_schema.endswith(".bytes")]
            stored, chunks = stored + sum(sizes), chunks + len(sizes)
    jpgs = list((out / fmt).rglob("*.jpg"))
    shared = [p for p in (out / "images").iterdir() if p.is_file()] if any(not f.is_relative_to(out / fmt) for f in files) else []
    stored += sum(p.stat().st_size for p in [*jpgs, *shared])
    named_bytes = {hashlib.sha256(f.read_bytes()).hexdigest(): f.stat().st_size for f in files}
    embedded = per_file_bytes if per_file else sum(held.values())
    distinct = {**{k: v for k, v in named_bytes.items() if per_file or k not in held}, "embedded": embedded}
    return {"stored": stored, "distinct": sum(distinct.values()), "named": len(files), "chunks": chunks,
            "shared": len(shared)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every recipe's oracle run; every other task is a test task, so pages of one document reach the train and the
    test files of each format (and the SFT and RL configs of hf/)."""
    ws, run_ids = oracle_runs(tmp_path_factory.mktemp("bytes") / "ws")
    path = Path(ws.tasks) / "test.parquet"
    tasks = read_records(str(path), Task)
    write_records(str(path), [t.model_copy(update={"split": "test" if i % 2 else "train"}) for i, t in enumerate(tasks)], Task)
    return ws, run_ids


@pytest.mark.slow
def test_each_format_folder_holds_its_images_about_once(runs, tmp_path):
    ws, run_ids = runs
    seen: dict[tuple[str, str, str], dict[str, int]] = {}
    for recipe, run in run_ids.items():
        for fmt, mode, target in EXPORTS:
            if target == "vragrl" and recipe == "mmdoc_r1":
                continue  # refused (tests/export/test_export_for_vragrl_fork.py)
            out = tmp_path / f"{recipe}-{fmt}-{mode}"
            export_run(ws, run, [fmt], out, config=ExportConfig(image_mode=mode), target=target)
            # VRAG-RL's fork opens each row's embedded bytes and reads its train and validation files apart: a page
            # both show is in each file by necessity, so its bound is per data file
            m = seen[(recipe, fmt, mode)] = image_bytes(out, fmt, per_file=target == "vragrl")
            assert m["stored"] <= BOUND * m["distinct"] + CHUNK * m["chunks"], (recipe, fmt, mode, m)
            # the export's images/ only when some rows name its files
            assert (out / "images").is_dir() == bool(m["shared"]), (recipe, fmt, mode, m)
    # not vacuous: the embedded forms (hf, the fork's verl rows) and the named ones (LLaMA-Factory) hold images
    assert seen[("evisrag", "verl", "bytes")]["distinct"] > 0 and seen[("evisrag", "hf", "path")]["named"] > 0
    assert seen[("evisrag", "llamafactory", "path")]["shared"] > 0
