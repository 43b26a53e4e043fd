"""`import_tasks`: a benchmark annotation file -> Task records in `tasks/<file-stem>.parquet`.

Bad rows (unknown document, page out of range, malformed fields) are reported one line each, recorded in
`tasks/import_errors.parquet` and skipped; they never stop the import. Re-importing a file rewrites the
same shard with the same content-derived task ids, so it is idempotent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.errors import VragError
from vrag_data.schema.records import SPLIT_PATTERN, IngestError, Task
from vrag_data.store import Workspace
from vrag_data.store.shards import exists, open_text
from vrag_data.tasks.formats import FORMATS, RowError, parse_row
from vrag_data.tasks.resolve import CorpusIndex, to_task
from vrag_data.tasks.store import record_import_errors, write_tasks

STAGE = "tasks.import"


class ImportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    format: str
    shard: str
    rows: int
    imported: int
    skipped: int
    duplicates: int = 0
    by_hop: dict[str, int] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)  # one line per skipped row


def read_rows(file: str) -> list[Any]:
    """Rows of a .json file (a list, or {"examples"|"data"|"samples": [...]}) or of a .jsonl file."""
    return [row for _, row in read_numbered_rows(file)]


def read_numbered_rows(file: str) -> list[tuple[str, Any]]:
    """(where, row) pairs: "line N" (the file's own line number) for JSON lines, "row N" for a JSON list.

    A UTF-8 byte-order mark is ignored. A jsonl line that is not JSON becomes a RowError placeholder so it is
    reported with its line number."""
    if not exists(file):
        raise VragError(f"{file}: file not found; pass the path of a benchmark annotation file")
    try:
        with open_text(file) as f:
            text = f.read()
    except UnicodeDecodeError:
        raise VragError(f"{file}: not a UTF-8 text file; pass a .json or .jsonl annotation file") from None
    text = text.removeprefix("\ufeff")  # editors on Windows write one
    try:  # one JSON document (a list, an object with a list, or a single-line jsonl)
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if not text.lstrip().startswith("{"):
            raise VragError(f"{file}: not valid JSON ({err.msg} at line {err.lineno}); fix or re-export the file")
        data = None  # several objects: JSON lines
    if data is not None:
        if isinstance(data, dict):
            for key in ("examples", "data", "samples"):
                if isinstance(data.get(key), list):
                    return [(f"row {i}", r) for i, r in enumerate(data[key], 1)]
            return [("row 1", data)]
        if isinstance(data, list):
            return [(f"row {i}", r) for i, r in enumerate(data, 1)]
        raise VragError(f"{file}: expected a list of rows or an object with 'examples', got {type(data).__name__}")
    rows: list[tuple[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as err:
            rows.append((f"line {n}", RowError(f"not valid JSON ({err.msg})")))
    return rows


def _row_id(row: Any) -> Any:
    if not isinstance(row, dict):
        return None
    return next((row[k] for k in ("id", "financebench_id", "uid", "qa_id") if row.get(k) not in (None, "")), None)


def _source_key(file: str) -> str:
    """How the error log names a source file: absolute for local paths, so re-imports replace their rows."""
    return file if "://" in file else str(Path(file).resolve())


def check_split(split: str) -> str:
    """A split name an export can use as a file, folder and HF split name, or one line saying what is wrong."""
    if not re.match(SPLIT_PATTERN, split):
        raise VragError(f"--split {split!r}: a split name is lower-case letters, digits and _ (e.g. train, test, "
                        "validation), at most 32 characters")
    return split


def import_tasks(file: str, ws: Workspace, fmt: str, split: str = "train",
                 benchmark: str | None = None) -> ImportSummary:
    check_split(split)
    if fmt not in FORMATS:
        raise VragError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")
    rows = read_numbered_rows(file)
    index = CorpusIndex(ws)
    if index.n_docs == 0:
        raise VragError(f"workspace {ws.root} has no ingested documents; "
                        f"run `vrag-data ingest PATH -w {ws.root}` first")
    name = PurePosixPath(file.replace("\\", "/")).name
    stem = name.rsplit(".", 1)[0] if "." in name else name
    tasks: list[Task] = []
    seen: set[str] = set()
    errors: list[str] = []
    duplicates = 0
    for at, row in rows:
        rid = _row_id(row)
        where = f"{name} {at}" + (f" (id {rid})" if rid not in (None, "") else "")
        try:
            if isinstance(row, RowError):
                raise row
            raw = parse_row(fmt, row)
            if benchmark:
                raw.benchmark = benchmark
            task = to_task(raw, index, split)
        except RowError as err:
            errors.append(f"{where}: {err}")
            continue
        if task.task_id in seen:
            duplicates += 1
            continue
        seen.add(task.task_id)
        tasks.append(task)
    ws.makedirs()
    shard = write_tasks(ws, stem, tasks)
    key = _source_key(file)
    record_import_errors(ws, key, [IngestError(path=key, stage=STAGE, reason=e) for e in errors])
    return ImportSummary(
        file=file, format=fmt, shard=shard, rows=len(rows), imported=len(tasks), skipped=len(errors),
        duplicates=duplicates, by_hop=dict(sorted(Counter(t.hop_type for t in tasks).items())), errors=errors,
    )
