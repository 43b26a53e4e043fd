"""Content-derived ids (DESIGN.md "Ids are content-derived")."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    import fsspec

    h = hashlib.sha256()
    with fsspec.open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def short_hash(*parts: Any, n: int = 16) -> str:
    return hashlib.sha256(stable_json(parts).encode()).hexdigest()[:n]


def task_id(doc_ids: list[str], question: str, source: str | None = None) -> str:
    """A task's id: its documents and question, plus, for an imported task, the source it came from (the
    workspace's name for the imported file), so the same question in two files stays two tasks while
    re-importing one file gives the same ids."""
    if source is None:
        return "t_" + short_hash(sorted(doc_ids), question.strip())
    return "t_" + short_hash(sorted(doc_ids), question.strip(), source)


def traj_id(run_id: str, task_id_: str, sample: int) -> str:
    return "tr_" + short_hash(run_id, task_id_, sample)


def page_id(stem: str, page: int) -> str:
    """The page basename VRAG-RL and UniDoc-RL match on: `<pdf_stem>_<page>` with a 1-based page."""
    return f"{stem}_{page}"


def split_page_id(pid: str) -> tuple[str, int]:
    stem, _, num = pid.rpartition("_")
    return stem, int(num)


def config_hash(cfg: dict[str, Any]) -> str:
    return short_hash(cfg)
