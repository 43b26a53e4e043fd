"""Parquet shards of pydantic records.

Top-level scalar fields become typed columns (so DuckDB and polars can filter on them); nested fields are
stored as JSON strings (stable across shards, whatever is null). Writes go to a temporary name and are
renamed into place, so a half-written shard never counts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from pydantic import BaseModel

from vrag_data.store.tempfiles import temp_name

M = TypeVar("M", bound=BaseModel)

_SCALAR = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(), datetime: pa.timestamp("us", tz="UTC")}


def _column_type(annotation: Any) -> pa.DataType | None:
    """Arrow type for a scalar field (str/int/float/bool/datetime/Literal, optionally `| None`), else None."""
    if annotation in _SCALAR:
        return _SCALAR[annotation]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return pa.string()
    if origin in (Union, UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1 and len(args) == 2:
            return _column_type(non_none[0])
    return None


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    fields = []
    for name, f in model.model_fields.items():
        t = _column_type(f.annotation)
        fields.append(pa.field(name, t if t is not None else pa.string()))
    return pa.schema(fields, metadata={b"vrag_model": model.__name__.encode()})


def _json_columns(model: type[BaseModel]) -> set[str]:
    return {n for n, f in model.model_fields.items() if _column_type(f.annotation) is None}


def records_to_table(records: Iterable[BaseModel], model: type[BaseModel]) -> pa.Table:
    schema = arrow_schema(model)
    js = _json_columns(model)
    cols: dict[str, list[Any]] = {n: [] for n in schema.names}
    for r in records:
        d = r.model_dump(mode="python")
        for n in schema.names:
            v = d[n]
            if n in js:
                v = json.dumps(r.model_dump(mode="json", include={n})[n], ensure_ascii=False)
            cols[n].append(v)
    return pa.table(cols, schema=schema)


def write_table_atomic(table: pa.Table, path: str) -> None:
    fs, p = url_to_fs(path)
    parent = p.rsplit("/", 1)[0]
    fs.makedirs(parent, exist_ok=True)
    tmp = temp_name(p, unique=True)  # `.tmp-<pid>-<hex>-<name>`: a killed writer's is swept by the next stage
    try:
        with fs.open(tmp, "wb") as f:
            pq.write_table(table, f, compression="zstd")
    except BaseException:  # a full disk, an interrupt: no half-written temp file stays behind
        try:
            fs.rm(tmp)
        except (OSError, FileNotFoundError):
            pass
        raise
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" in protocols:
        os.replace(tmp, p)  # atomic on POSIX
    else:
        fs.mv(tmp, p)


def write_records(path: str, records: Iterable[BaseModel], model: type[BaseModel]) -> int:
    table = records_to_table(records, model)
    write_table_atomic(table, path)
    return table.num_rows


def write_record_batches(path: str, batches: Iterable[Sequence[BaseModel]], model: type[BaseModel]) -> int:
    """`write_records` for records that come in batches: each batch is written as it comes (memory holds one
    batch), into a temp file renamed into place when all are written; the number of rows."""
    fs, p = url_to_fs(path)
    fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
    tmp = temp_name(p, unique=True)
    rows = 0
    try:
        with fs.open(tmp, "wb") as f, pq.ParquetWriter(f, arrow_schema(model), compression="zstd") as w:
            for batch in batches:
                if batch:
                    w.write_table(records_to_table(batch, model))
                    rows += len(batch)
    except BaseException:  # a full disk, an interrupt, a bad row: no half-written temp file stays behind
        if fs.exists(tmp):
            fs.rm(tmp)
        raise
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" in protocols:
        os.replace(tmp, p)
    else:
        fs.mv(tmp, p)
    return rows


def _shard_model(fs: fsspec.AbstractFileSystem, path: str) -> str | None:
    meta = pq.read_schema(path, filesystem=fs).metadata or {}
    name = meta.get(b"vrag_model")
    return name.decode() if name else None


def read_table(path: str, model: type[BaseModel] | None = None) -> pa.Table:
    """A shard, or every shard of a folder. With `model`, a folder's shards of other record types (an error
    log beside the tasks, say) are left out, so mixed folders read cleanly."""
    fs, p = url_to_fs(path)
    if fs.isdir(p):
        files = sorted(f for f in fs.find(p) if f.endswith(".parquet") and "/.tmp-" not in f)
        if model is not None:
            files = [f for f in files if _shard_model(fs, f) in (model.__name__, None)]
        if not files:
            return pa.table({})
        return pa.concat_tables([pq.read_table(f, filesystem=fs) for f in files], promote_options="default")
    return pq.read_table(p, filesystem=fs)


def iter_records(path: str, model: type[M]) -> Iterator[M]:
    js = _json_columns(model)
    table = read_table(path, model)
    for row in table.to_pylist():
        for n in js:
            if n in row and isinstance(row[n], str):
                row[n] = json.loads(row[n])
        yield model.model_validate(row)


def read_records(path: str, model: type[M]) -> list[M]:
    fs, p = url_to_fs(path)
    if not fs.exists(p):
        return []
    return list(iter_records(path, model))


def exists(path: str) -> bool:
    fs, p = url_to_fs(path)
    return fs.exists(p)


def open_text(path: str, mode: str = "r"):  # noqa: ANN201 - thin fsspec passthrough
    return fsspec.open(path, mode, encoding="utf-8")
