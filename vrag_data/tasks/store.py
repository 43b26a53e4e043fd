"""Task shards in the workspace: `tasks/<name>.parquet`, one per imported file or generator run."""

from __future__ import annotations

import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from vrag_data.schema.records import IngestError, Task
from vrag_data.store import Workspace, read_records, write_records

ERRORS_FILE = "import_errors.parquet"


def shard_path(ws: Workspace, name: str) -> str:
    return f"{ws.tasks}/{name}.parquet"


def write_tasks(ws: Workspace, name: str, tasks: list[Task]) -> str:
    """Replace the shard `name` atomically (re-importing the same file gives the same shard)."""
    path = shard_path(ws, name)
    write_records(path, tasks, Task)
    return path


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
    kept = [e for e in read_records(path, IngestError) if e.path != source]
    write_records(path, [*kept, *errors], IngestError)
    return path


def load_import_errors(ws: Workspace) -> list[IngestError]:
    return read_records(f"{ws.tasks}/{ERRORS_FILE}", IngestError)
