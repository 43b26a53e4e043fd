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
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from fsspec.core import url_to_fs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vrag_data.errors import VragError
from vrag_data.ids import task_id
from vrag_data.schema.records import SPLIT_PATTERN, IngestError, Task
from vrag_data.store import Workspace, read_records
from vrag_data.tasks.formats import FORMATS, MAX_BYTES, MAX_LINE_BYTES, RowError, parse_row
from vrag_data.tasks.reader import check_source, read_numbered_rows
from vrag_data.tasks.resolve import CorpusIndex, to_task
from vrag_data.tasks.store import (
    import_shard_name,
    record_import_errors,
    shard_model,
    shard_path,
    shard_task_ids,
    source_key,
    write_task_batches,
)

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


BATCH = 10_000  # tasks written to the shard at a time: memory holds one batch, not the file's tasks


@dataclass
class _Tally:
    """What an import keeps of the tasks it has written: their ids (for duplicates and the summary), the ids an
    earlier version gave them, hop counts, and one line per skipped row."""

    seen: set[str] = field(default_factory=set)
    legacy: set[str] = field(default_factory=set)  # `task_id(doc_ids, question)`: an earlier version's ids
    hops: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    rows: int = 0
    duplicates: int = 0


def _task_batches(rows: Iterator[tuple[str, Any]], name: str, fmt: str, index: CorpusIndex, split: str,
                  benchmark: str | None, source: str, tally: _Tally) -> Iterator[list[Task]]:
    """The file's tasks in batches of `BATCH`, in file order, each task once; `tally` counts as they go."""
    batch: list[Task] = []
    for at, row in rows:
        tally.rows += 1
        rid = _row_id(row)
        where = f"{name} {at}" + (f" (id {str(rid)[:60]})" if rid not in (None, "") else "")
        try:
            task = _task(fmt, row, index, split, benchmark, source)
        except Exception as err:  # whatever one row's content makes a parser raise is that row's error, not the file's
            tally.errors.append(one_line(f"{where}: {_reason(err)}"))
            continue
        if task.task_id in tally.seen:
            tally.duplicates += 1
            continue
        tally.seen.add(task.task_id)
        tally.legacy.add(task_id(task.doc_ids, task.question))
        tally.hops[task.hop_type] += 1
        batch.append(task)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    yield batch


def _replace_earlier_shard(ws: Workspace, file: str, have: set[str]) -> str | None:
    """An earlier version wrote this file's tasks to `tasks/<stem>.parquet` with ids that left out the source
    (`have`: this import's tasks under those ids). Remove that shard when this import holds every one of its tasks
    (so nothing is lost, and nothing is doubled)."""
    name = PurePosixPath(file.replace("\\", "/")).name
    stem = name.rsplit(".", 1)[0] if "." in name else name
    path = shard_path(ws, stem)
    if stem in ("generated", "import_errors") or shard_model(path) != "Task":
        return None
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
    path = shard_path(ws, shard_name)
    before = shard_task_ids(path)
    ws.makedirs()
    tally = _Tally()
    # streamed: a batch of tasks is written as the rows come; a file that stops (cap, broken document) writes nothing
    shard = write_task_batches(ws, shard_name, _task_batches(rows, name, fmt, index, split, benchmark, shard_name, tally))
    record_import_errors(ws, key, [IngestError(path=key, stage=STAGE, reason=e) for e in tally.errors])
    replaced = _replace_earlier_shard(ws, file, tally.legacy)
    now = tally.seen
    return ImportSummary(
        file=file, format=fmt, shard=shard, rows=tally.rows, imported=len(now), skipped=len(tally.errors),
        duplicates=tally.duplicates, added=len(now - before), dropped=len(before - now), replaced_shard=replaced,
        by_hop=dict(sorted(tally.hops.items())), errors=tally.errors,
    )
