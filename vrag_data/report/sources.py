"""Find a workspace's parquet shards and JSON summaries and hand them to DuckDB as raw tables.

A run folder's files are the ones `RunDir` lists (the layout has one owner); its manifest and verdict freshness
come from `RunDir` too, so the report and the exporter read a run the same way.

Every raw table exists after loading, even when its files are absent (empty, with the record's columns),
so the derived tables and views never fail on a workspace that has not reached a stage yet. Local shards
are scanned by DuckDB directly; shards behind an fsspec URL are read with pyarrow and registered.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from pydantic import BaseModel

from vrag_data.errors import VragError
from vrag_data.schema.records import (
    Document,
    IngestError,
    LayoutBlock,
    Page,
    RequestLog,
    Task,
    Trajectory,
    Verdict,
)
from vrag_data.store import Workspace
from vrag_data.store.run import RunDir
from vrag_data.store.shards import arrow_schema


def parquet_files(path: str) -> list[str]:
    """Complete parquet shards under `path` (a file or a folder), sorted; `.tmp-*` files are skipped."""
    fs, p = url_to_fs(path)
    if not fs.exists(p):
        return []
    if not fs.isdir(p):
        return [path] if p.endswith(".parquet") else []
    prefix = path.split("://", 1)[0] + "://" if "://" in path else ""
    found = sorted(f for f in fs.find(p) if f.endswith(".parquet") and "/.tmp-" not in f and not f.rsplit("/", 1)[-1].startswith(".tmp-"))
    return [f if prefix == "" or f.startswith(prefix) else prefix + f for f in found]


def of_model(files: Sequence[str], model: type[BaseModel]) -> list[str]:
    """The shards written for `model` (or without a record tag): a folder may hold other record types."""
    out = []
    for f in files:
        fs, p = url_to_fs(f)
        tag = (pq.read_schema(p, filesystem=fs).metadata or {}).get(b"vrag_model")
        if tag in (None, model.__name__.encode()):
            out.append(f)
    return out


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def load_parquet(con: duckdb.DuckDBPyConnection, name: str, files: Sequence[str], model: type[BaseModel]) -> None:
    """`name` (a view over local shards, else a table) with every field of `model` plus `filename` (the shard).

    Columns a shard lacks (written before a field was added) read as NULL, so derived SQL can rely on every
    field of the record. Local shards stay a lazy view: the derived tables read only the columns they use.
    """
    con.execute(f"DROP VIEW IF EXISTS {name}")
    con.execute(f"DROP TABLE IF EXISTS {name}")
    fields = list(arrow_schema(model))
    if files and all(_is_local(f) for f in files):
        local = _local_shards(con, [f.removeprefix("file://") for f in files], model)
        if local:
            scan = "read_parquet(" + _sql_list(local) + ", union_by_name = true, filename = true)"
            have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
            cols = [f'"{f.name}"' if f.name in have else f'CAST(NULL AS {_SQL_TYPES.get(str(f.type), "VARCHAR")}) AS "{f.name}"' for f in fields]
            con.execute(f"CREATE VIEW {name} AS SELECT {', '.join(cols)}, filename FROM {scan}")
            return
        files = []
    files = of_model(files, model)
    if files:
        tables = []
        for f in files:
            fs, p = url_to_fs(f)
            with fs.open(p, "rb") as fh:
                t = pq.read_table(fh)
            tables.append(t.append_column("filename", pa.array([f] * t.num_rows, pa.string())))
        arrow = pa.concat_tables(tables, promote_options="default")
    else:
        arrow = arrow_schema(model).empty_table().append_column("filename", pa.array([], pa.string()))
    con.register(f"_arrow_{name}", arrow)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM _arrow_{name}")
    con.unregister(f"_arrow_{name}")
    have = {r[0] for r in con.execute(f"SELECT column_name FROM (DESCRIBE {name})").fetchall()}
    for field in fields:
        if field.name not in have:
            con.execute(f'ALTER TABLE {name} ADD COLUMN "{field.name}" {_SQL_TYPES.get(str(field.type), "VARCHAR")}')


def _local_shards(con: duckdb.DuckDBPyConnection, files: list[str], model: type[BaseModel]) -> list[str]:
    """The local shards written for `model` (or untagged), read by DuckDB in one call: a run writes
    thousands of small shards, and opening each footer from Python cost ~0.4 ms a file; the metadata
    cache set in `load_raw` then serves the later scans of the same files."""
    tags = dict(con.execute("SELECT file_name, decode(value) FROM parquet_kv_metadata(?) WHERE decode(key) = 'vrag_model'",
                            [files]).fetchall())
    return [f for f in files if tags.get(f, model.__name__) == model.__name__]


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


_SQL_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN", "timestamp[us, tz=UTC]": "TIMESTAMPTZ"}


def run_dirs(ws: Workspace, run: str | None) -> list[RunDir]:
    """The run folders to report on: all of `runs/`, or just `run` (which must exist)."""
    fs, root = url_to_fs(ws.runs)
    if run is not None:
        if not fs.exists(f"{root}/{run}"):
            raise VragError(f"{ws.run(run)}: run not found; list runs under {ws.runs} or run `vrag-data synth` first")
        return [RunDir(ws.run(run))]
    if not fs.exists(root):
        return []
    out = []
    for entry in sorted(fs.ls(root, detail=True), key=lambda e: e["name"]):
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if entry["type"] == "directory" and not name.startswith("."):
            out.append(RunDir(ws.run(name)))
    return out


def _read_json(path: str) -> dict | None:
    fs, p = url_to_fs(path)
    if not fs.exists(p):
        return None
    try:
        with fs.open(p, "r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def manifests(runs: Sequence[RunDir]) -> list[dict]:
    """One row per run folder with its manifest (a folder without a readable one still gets a row, status
    `unknown`) and the freshness of its verdicts (`RunDir.verdict_state`, the rule the exporter refuses by)."""
    rows = []
    for r in runs:
        try:
            m = r.manifest()
        except (OSError, ValueError):
            m = None
        state, why = r.verdict_state()
        rows.append({
            "run_id": r.run_id,
            "recipe": m.recipe if m else None,
            "status": m.status if m else "unknown",
            "samples": m.samples if m else None,
            "n_tasks": m.n_tasks if m else None,
            "config_hash": m.config_hash if m else None,
            "code_version": m.code_version if m else None,
            "created_at": m.created_at if m else None,
            "finished_at": m.finished_at if m else None,
            "stats": json.dumps(m.stats if m else {}, default=str),
            "config": json.dumps(m.config if m else {}, default=str),
            "verdict_state": state,
            "verdict_note": why,
        })
    return rows


EXPORT_REGISTRY = "registry.jsonl"  # one line per export written outside exports/ ({"out_dir": ...})


def export_summaries(ws: Workspace, run_ids: set[str] | None) -> list[dict]:
    """`summary.json` files written by `vrag-data export` under `exports/` (any depth up to 3), and those of every
    export written elsewhere (`--out`), which registers its folder in `exports/registry.jsonl`."""
    fs, root = url_to_fs(ws.exports)
    if not fs.exists(root):
        return []
    rows = []
    found = [f for f in sorted(fs.find(root, maxdepth=3)) if f.endswith("/summary.json")]
    reg = f"{root}/{EXPORT_REGISTRY}"
    if fs.exists(reg):
        with fs.open(reg, "r") as fh:
            for line in fh:
                try:
                    out = json.loads(line)["out_dir"]
                except (ValueError, KeyError, TypeError):
                    continue
                f = f"{out.rstrip('/')}/summary.json"
                if f not in found and os.path.isfile(f):
                    found.append(f)
    for f in found:
        data = _read_json(f if "://" not in ws.exports else f"{ws.exports.split('://')[0]}://{f}")
        if not data or "run_id" not in data or (run_ids is not None and data["run_id"] not in run_ids):
            continue
        data["out_dir"] = f.rsplit("/", 1)[0]  # where it is now: summary.json names no folder (exports are moved)
        try:
            mtime = float(fs.info(f).get("mtime") or fs.info(f).get("created") or 0.0)
        except (OSError, TypeError, ValueError):
            mtime = 0.0
        rows.append({"summary_path": f, "mtime": mtime, **data})
    return rows


CORPUS = {
    "raw_documents": ("documents", Document),
    "raw_pages": ("pages", Page),
    "raw_layout": ("layout", LayoutBlock),
}
# raw table -> (the run's files of it, per `RunDir`, and their record type)
RUN_TABLES: dict[str, tuple[Callable[[RunDir], list[str]], type[BaseModel]]] = {
    "raw_trajectories": (lambda r: r.part_files() + r.augmented_files(), Trajectory),
    "raw_verdicts": (RunDir.verdict_files, Verdict),
    "raw_requests": (RunDir.request_log_files, RequestLog),
}


def load_raw(con: duckdb.DuckDBPyConnection, ws: Workspace, runs: Sequence[RunDir]) -> None:
    """Every raw_* table of the report (see module docstring)."""
    # the derived tables scan some shards more than once: parse each footer once (matters for small shards)
    con.execute("SET parquet_metadata_cache = true")
    for name, (table, model) in CORPUS.items():
        load_parquet(con, name, parquet_files(ws.corpus_table(table)), model)
    errors = parquet_files(ws.corpus_table("errors")) + parquet_files(f"{ws.tasks}/import_errors.parquet")
    load_parquet(con, "raw_ingest_errors", errors, IngestError)
    from vrag_data.tasks.store import task_shards  # shards holding Task records only

    load_parquet(con, "raw_tasks", task_shards(ws), Task)
    for name, (files_of, model) in RUN_TABLES.items():
        load_parquet(con, name, [f for r in runs for f in files_of(r)], model)
