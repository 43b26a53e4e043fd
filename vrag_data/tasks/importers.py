"""`import_tasks`: a benchmark annotation file -> Task records in `tasks/<file-stem>-<hash>.parquet`.

Nothing is lost: each imported file has its own shard (named from where the file is, so two `qa.jsonl` from two
folders add up) and its task ids include that source (the same question in two files stays two tasks). A bad row
(unknown document, page out of range, malformed or unreadable line) is reported one line each, recorded in
`tasks/import_errors.parquet` and skipped; it never stops the import. Re-importing a file rewrites its shard with
the same ids, so it is idempotent. Files and lines are read within byte caps (`--max-bytes`, `--max-line-bytes`),
so a huge file or an endless stream stops with one line.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from fsspec.core import url_to_fs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vrag_data.errors import VragError
from vrag_data.ids import task_id
from vrag_data.schema.records import SPLIT_PATTERN, IngestError, Task
from vrag_data.store import Workspace, read_records
from vrag_data.store.shards import exists
from vrag_data.tasks.formats import FORMATS, MAX_BYTES, MAX_LINE_BYTES, RowError, parse_row
from vrag_data.tasks.reader import check_source, read_numbered_rows
from vrag_data.tasks.resolve import CorpusIndex, to_task
from vrag_data.tasks.store import import_shard_name, record_import_errors, shard_model, shard_path, source_key, write_tasks

STAGE = "tasks.import"
MAX_ERROR_CHARS = 300


class ImportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    format: str
    shard: str
    rows: int
    imported: int
    skipped: int
    duplicates: int = 0
    added: int = 0  # imported tasks this file's shard did not hold before (0 on a re-import)
    dropped: int = 0  # tasks this file's shard held before that the file no longer yields
    replaced_shard: str | None = None  # the shard an earlier version wrote for this file (`<stem>.parquet`), removed
    by_hop: dict[str, int] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)  # one line per skipped row


def read_rows(file: str, max_bytes: int = MAX_BYTES, max_line_bytes: int = MAX_LINE_BYTES) -> list[Any]:
    """Rows of a .json file (a list, or {"examples"|"data"|"samples": [...]}) or of a .jsonl file."""
    return [row for _, row in read_numbered_rows(file, max_bytes, max_line_bytes)]


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A message as one short line: control characters escaped, cut at `limit` characters."""
    text = re.sub(r"[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]", lambda m: ascii(m.group())[1:-1], text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _row_id(row: Any) -> Any:
    if not isinstance(row, dict):
        return None
    return next((row[k] for k in ("id", "financebench_id", "uid", "qa_id") if row.get(k) not in (None, "")), None)


def check_split(split: str) -> str:
    """A split name an export can use as a file, folder and HF split name, or one line saying what is wrong."""
    if not re.match(SPLIT_PATTERN, split):
        raise VragError(f"--split {split!r}: a split name is lower-case letters, digits and _ (e.g. train, test, "
                        "validation), at most 32 characters")
    return split


def _task(fmt: str, row: Any, index: CorpusIndex, split: str, benchmark: str | None, source: str) -> Task:
    if isinstance(row, RowError):
        raise row
    raw = parse_row(fmt, row)
    if benchmark:
        raw.benchmark = benchmark
    task = to_task(raw, index, split, source)
    # a lone surrogate (half of a UTF-16 pair, written as an escape) is valid JSON but is not UTF-8: the shard
    # could not be written (hashing the id refuses it first when it is in the question)
    json.dumps(task.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    return task


def _reason(err: Exception) -> str:
    if isinstance(err, RowError):
        return str(err)
    if isinstance(err, UnicodeEncodeError):
        return f"holds text that is not valid Unicode ({err.reason}: {err.object[err.start:err.end]!a})"
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        return f"field {'.'.join(map(str, first['loc'])) or 'row'}: {first['msg']}"
    return f"malformed row ({type(err).__name__}: {str(err)[:120]})"


def _rows_to_tasks(rows: Iterator[tuple[str, Any]], name: str, fmt: str, index: CorpusIndex, split: str,
                   benchmark: str | None, source: str) -> tuple[list[Task], list[str], int, int]:
    tasks: list[Task] = []
    seen: set[str] = set()
    errors: list[str] = []
    n_rows = duplicates = 0
    for at, row in rows:
        n_rows += 1
        rid = _row_id(row)
        where = f"{name} {at}" + (f" (id {str(rid)[:60]})" if rid not in (None, "") else "")
        try:
            task = _task(fmt, row, index, split, benchmark, source)
        except Exception as err:  # whatever one row's content makes a parser raise is that row's error, not the file's
            errors.append(one_line(f"{where}: {_reason(err)}"))
            continue
        if task.task_id in seen:
            duplicates += 1
            continue
        seen.add(task.task_id)
        tasks.append(task)
    return tasks, errors, n_rows, duplicates


def _replace_earlier_shard(ws: Workspace, file: str, tasks: list[Task]) -> str | None:
    """An earlier version wrote this file's tasks to `tasks/<stem>.parquet` with ids that left out the source.
    Remove that shard when this import holds every one of its tasks (so nothing is lost, and nothing is doubled)."""
    name = PurePosixPath(file.replace("\\", "/")).name
    stem = name.rsplit(".", 1)[0] if "." in name else name
    path = shard_path(ws, stem)
    if stem in ("generated", "import_errors") or shard_model(path) != "Task":
        return None
    have = {task_id(t.doc_ids, t.question) for t in tasks}
    earlier = read_records(path, Task)
    if not earlier or any(t.task_id not in have for t in earlier):
        return None
    fs, p = url_to_fs(path)
    fs.rm(p)
    return path


def import_tasks(file: str, ws: Workspace, fmt: str, split: str = "train", benchmark: str | None = None,
                 max_bytes: int = MAX_BYTES, max_line_bytes: int = MAX_LINE_BYTES) -> ImportSummary:
    check_split(split)
    if fmt not in FORMATS:
        raise VragError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")
    check_source(file, max_bytes)
    index = CorpusIndex(ws)
    if index.n_docs == 0:
        raise VragError(f"workspace {ws.root} has no ingested documents; "
                        f"run `vrag-data ingest PATH -w {ws.root}` first")
    name = one_line(PurePosixPath(file.replace("\\", "/")).name, 120)
    shard_name = import_shard_name(file)
    key = source_key(file)  # the error log's name for the file
    rows = read_numbered_rows(file, max_bytes, max_line_bytes)
    tasks, errors, n_rows, duplicates = _rows_to_tasks(rows, name, fmt, index, split, benchmark, shard_name)
    path = shard_path(ws, shard_name)
    before = {t.task_id for t in read_records(path, Task)} if exists(path) else set()
    ws.makedirs()
    shard = write_tasks(ws, shard_name, tasks)
    record_import_errors(ws, key, [IngestError(path=key, stage=STAGE, reason=e) for e in errors])
    replaced = _replace_earlier_shard(ws, file, tasks)
    now = {t.task_id for t in tasks}
    return ImportSummary(
        file=file, format=fmt, shard=shard, rows=n_rows, imported=len(tasks), skipped=len(errors),
        duplicates=duplicates, added=len(now - before), dropped=len(before - now), replaced_shard=replaced,
        by_hop=dict(sorted(Counter(t.hop_type for t in tasks).items())), errors=errors,
    )
