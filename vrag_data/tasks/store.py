"""Task shards in the workspace: `tasks/<name>.parquet`, one per imported file or generator run.

An imported file's shard is `<stem>-<hash of where the file is>`, so two files of the same name from two folders
keep two shards, and no file name can name one of the workspace's own files (`import_errors.parquet`,
`generated.parquet`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.schema.records import IngestError, Task
from vrag_data.store import Workspace, read_records, write_records
from vrag_data.store.shards import write_record_batches

ERRORS_FILE = "import_errors.parquet"  # the workspace's own name for the import error log
EARLIER_TASKS = "import_errors-earlier-tasks.parquet"  # tasks an earlier version wrote over the error log's name


def source_key(file: str) -> str:
    """Where an imported file is: its resolved absolute path (a URL as given); its tasks' ids and shard derive from it.
    A byte of a file name that is not UTF-8 is kept as a backslash escape, so the key can be hashed and stored."""
    key = file if "://" in file else str(Path(file).expanduser().resolve())
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def import_shard_name(file: str) -> str:
    """`<stem>-<10 hex>`: the stem made safe as a file name (never hidden, never a temporary `.tmp-` name)."""
    key = source_key(file)
    name = key.rstrip("/").rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_-")[:60] or "tasks"
    return f"{safe}-{short_hash(key, n=10)}"


def import_shard_path(ws: Workspace, file: str) -> str:
    return shard_path(ws, import_shard_name(file))


def shard_path(ws: Workspace, name: str) -> str:
    return f"{ws.tasks}/{name}.parquet"


def write_tasks(ws: Workspace, name: str, tasks: list[Task]) -> str:
    """Replace the shard `name` atomically (re-importing the same file gives the same shard)."""
    if f"{name}.parquet" in (ERRORS_FILE, EARLIER_TASKS) or name.startswith("."):
        raise VragError(f"tasks/{name}.parquet is a name the workspace keeps for itself; pick another shard name")
    path = shard_path(ws, name)
    write_records(path, tasks, Task)
    return path


def write_task_batches(ws: Workspace, name: str, batches: Iterable[Sequence[Task]]) -> str:
    """`write_tasks` for tasks that come in batches (an import streaming a large file): one batch in memory."""
    if f"{name}.parquet" in (ERRORS_FILE, EARLIER_TASKS) or name.startswith("."):
        raise VragError(f"tasks/{name}.parquet is a name the workspace keeps for itself; pick another shard name")
    path = shard_path(ws, name)
    write_record_batches(path, batches, Task)
    return path


def shard_task_ids(path: str) -> set[str]:
    """The task ids a shard holds (empty when there is none), read without the tasks themselves."""
    fs, p = url_to_fs(path)
    if not fs.exists(p):
        return set()
    return set(pq.read_table(p, columns=["task_id"], filesystem=fs).column("task_id").to_pylist())


def count_tasks(ws: Workspace) -> int:
    """How many tasks the workspace holds (each task_id once, as `load_tasks` counts), without loading them."""
    ids: set[str] = set()
    for shard in task_shards(ws):
        ids |= shard_task_ids(shard)
    return len(ids)


def task_shards(ws: Workspace) -> list[str]:
    """Parquet files under tasks/ that hold Task records (error logs and foreign files are left out)."""
    fs, root = url_to_fs(ws.tasks)
    if not fs.exists(root):
        return []
    out = []
    for f in sorted(fs.find(root)):
        name = f.rsplit("/", 1)[-1]
        if not f.endswith(".parquet") or name.startswith(".tmp-"):
            continue
        meta = pq.read_schema(f, filesystem=fs).metadata or {}
        if meta.get(b"vrag_model") == b"Task":
            out.append(f if "://" not in ws.tasks else f"{ws.tasks.split('://')[0]}://{f}")
    return out


def load_tasks(ws: Workspace, limit: int | None = None) -> list[Task]:
    """All tasks of the workspace in a stable order (shard name, then row), each task_id once."""
    seen: set[str] = set()
    out: list[Task] = []
    for shard in task_shards(ws):
        for t in read_records(shard, Task):
            if t.task_id in seen:
                continue
            seen.add(t.task_id)
            out.append(t)
            if limit is not None and len(out) >= limit:
                return out
    return out


def record_import_errors(ws: Workspace, source: str, errors: list[IngestError]) -> str:
    """Replace this source file's rows in tasks/import_errors.parquet, keeping other files' rows."""
    path = f"{ws.tasks}/{ERRORS_FILE}"
    _move_earlier_tasks(path, f"{ws.tasks}/{EARLIER_TASKS}")
    kept = [e for e in read_records(path, IngestError) if e.path != source]
    write_records(path, [*kept, *errors], IngestError)
    return path


def load_import_errors(ws: Workspace) -> list[IngestError]:
    path = f"{ws.tasks}/{ERRORS_FILE}"
    return read_records(path, IngestError) if shard_model(path) in ("IngestError", None) else []


def shard_model(path: str) -> str | None:
    """The record type a shard holds (its `vrag_model` metadata); None when the file is missing or says nothing."""
    fs, p = url_to_fs(path)
    if not fs.exists(p):
        return None
    name = (pq.read_schema(p, filesystem=fs).metadata or {}).get(b"vrag_model")
    return name.decode() if name else None


def _move_earlier_tasks(path: str, aside: str) -> None:
    """An earlier version named a shard after the imported file, so a user's `import_errors.jsonl` wrote its tasks
    where the error log lives: keep those tasks (under a name task listing still reads) and free the log's name."""
    if shard_model(path) == "Task":
        fs, p = url_to_fs(path)
        fs.mv(p, url_to_fs(aside)[1])
