"""Atomic, sharded writers for export files.

Every shard is written under `<out>/.tmp/` and renamed into its final folder only when complete, so a crash
never leaves a half-written shard where a trainer would pick it up (LLaMA-Factory and `datasets` read every
file of a folder). Shards are flushed as records arrive, so memory is bounded by one shard.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def atomic_write(out_root: Path, final: Path, write: Callable[[Path], None]) -> None:
    tmp_dir = out_root / ".tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{uuid.uuid4().hex}{final.suffix}"
    try:
        write(tmp)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)  # atomic on POSIX
    finally:
        tmp.unlink(missing_ok=True)


def write_json(out_root: Path, final: Path, obj: object) -> None:
    atomic_write(out_root, final, lambda p: p.write_text(json.dumps(obj, ensure_ascii=False, indent=1), encoding="utf-8"))


def write_text(out_root: Path, final: Path, text: str) -> None:
    atomic_write(out_root, final, lambda p: p.write_text(text, encoding="utf-8"))


class ShardWriter:
    """Buffers rows and writes `<folder>/<prefix>-00000.<ext>` shards of at most `shard_size` rows."""

    def __init__(
        self,
        out_root: Path,
        folder: Path,
        prefix: str,
        kind: str,
        shard_size: int,
        schema: pa.Schema | None = None,
        prepare: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
        weigh: Callable[[dict[str, Any]], int] | None = None,
        max_bytes: int | None = None,
        dictionary: list[str] | None = None,
    ) -> None:
        if kind not in ("parquet", "json", "jsonl"):
            raise ValueError(f"unknown shard kind {kind!r}")
        if kind == "parquet" and schema is None:
            raise ValueError("parquet shards need a schema")
        self.out_root, self.folder, self.prefix, self.kind = out_root, folder, prefix, kind
        self.shard_size = max(1, shard_size)
        self.schema = schema
        self.prepare = prepare  # turns buffered rows into written rows (e.g. loads image bytes) at flush time
        # shards that embed image bytes are also cut by size, so one shard's bytes bound the memory
        self.weigh, self.max_bytes = weigh, max_bytes
        self.buffer_bytes = 0
        # parquet leaf columns dictionary-encoded without a size cap: a value repeated across rows (an image shown
        # by many records) is stored once per shard
        self.dictionary = dictionary
        self.buffer: list[dict[str, Any]] = []
        self.paths: list[Path] = []
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if self.weigh is not None:
            self.buffer_bytes += self.weigh(row)
        if len(self.buffer) >= self.shard_size or (self.max_bytes is not None and self.buffer_bytes >= self.max_bytes):
            self.flush()

    def flush(self, allow_empty: bool = False) -> None:
        if not self.buffer and not allow_empty:
            return
        rows = self.prepare(self.buffer) if self.prepare else self.buffer
        final = self.folder / f"{self.prefix}-{len(self.paths):05d}.{self.kind}"
        if self.kind == "parquet":
            table = pa.Table.from_pylist(rows, schema=self.schema)
            kw: dict[str, Any] = {}
            if self.dictionary:
                # no min/max statistics of embedded image bytes: they would copy two images into the metadata
                kw = {"use_dictionary": self.dictionary, "dictionary_pagesize_limit": 1 << 30,
                      "write_statistics": [c for c in leaf_paths(table.schema) if not c.endswith(".bytes")]}
            atomic_write(self.out_root, final, lambda p: pq.write_table(table, p, compression="zstd", **kw))
        elif self.kind == "json":
            write_json(self.out_root, final, rows)
        else:
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            write_text(self.out_root, final, text)
        self.paths.append(final)
        self.rows += len(self.buffer)
        self.buffer = []
        self.buffer_bytes = 0

    def close(self, empty_shard: bool = False) -> list[Path]:
        """Flush the rest; with `empty_shard`, write one zero-row shard when nothing was written (a loadable split)."""
        self.flush()
        if empty_shard and not self.paths:
            self.flush(allow_empty=True)
        return self.paths


def leaf_paths(schema: pa.Schema) -> list[str]:
    """The parquet leaf column paths of `schema` ("images.list.element.bytes"), as the writer's options name them."""
    def walk(name: str, t: pa.DataType) -> list[str]:
        if pa.types.is_struct(t):
            return [p for i in range(t.num_fields) for p in walk(f"{name}.{t.field(i).name}", t.field(i).type)]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return walk(f"{name}.list.element", t.value_type)
        return [name]
    return [p for f in schema for p in walk(f.name, f.type)]
