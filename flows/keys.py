"""Cache keys for shard tasks: what a shard reads (content), the settings that change its output (config)
and the code version. Same key = same output, so a re-run of a flow skips the shard.

Source inputs (PDFs, QA files) are hashed by their bytes. Files a stage derived itself (corpus tables, trajectory
shards, verdicts) are fingerprinted by name, size and modification time: cheap on large runs, and conservative
(a rewrite with equal bytes only costs one re-run of the next stage, which is idempotent anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

from fsspec.core import url_to_fs
from prefect.cache_policies import CachePolicy

from vrag_data.ids import sha256_file, short_hash
from vrag_data.version import code_version


def files_digest(paths: list[str]) -> str:
    """Content hash of source files (order-independent)."""
    return short_hash(sorted((p.rsplit("/", 1)[-1], sha256_file(p)) for p in paths), n=24)


def tree_fingerprint(*roots: str, pattern: str | None = None) -> str:
    """Names, sizes and mtimes of every file under `roots` whose name matches `pattern` (a glob); missing
    roots count as empty."""
    rows: list[tuple[str, int, Any]] = []
    for root in roots:
        fs, path = url_to_fs(root)
        if not fs.exists(path):
            rows.append((root, -1, None))
            continue
        found = fs.find(path, detail=True) if fs.isdir(path) else {path: fs.info(path)}
        for name, info in sorted(found.items()):
            base = name.rsplit("/", 1)[-1]
            if base.startswith(".tmp-") or (pattern and not fnmatch(base, pattern)):
                continue  # half-written files of a concurrent writer, or files the stage does not read
            mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
            rows.append((name, int(info.get("size") or 0), str(mtime)))
    return short_hash(rows, n=24)


def stage_key(stage: str, content: Any, config: Any) -> str:
    return f"{stage}-{short_hash(content, config, code_version(), n=24)}"


@dataclass
class ShardKey(CachePolicy):
    """Prefect cache policy: the key is the task's `key` argument (built by the flow with `stage_key`).

    Keeping the key an explicit argument makes it visible in the UI and lets tests compute it."""

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        key = inputs.get("key")
        return str(key) if key else None
