"""Tasks: benchmark import (and, later, generation) into `tasks/*.parquet` shards of Task records."""

from vrag_data.tasks.importers import ImportSummary, import_tasks
from vrag_data.tasks.store import import_shard_path, load_import_errors, load_tasks, write_tasks

__all__ = ["ImportSummary", "import_tasks", "import_shard_path", "load_tasks", "load_import_errors", "write_tasks"]
