"""What RL rollouts run against: the workspace's tasks, pages, layout and search index."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from vrag_data.errors import VragError
from vrag_data.schema.records import Document, ImageRef, LayoutBlock, Page, Task
from vrag_data.store import Workspace, read_records


def _load_tasks(ws: Workspace) -> list[Task]:
    try:
        from vrag_data.tasks.store import load_tasks

        return list(load_tasks(ws))
    except ImportError:
        if not ws.exists(ws.tasks):
            return []
        tasks = read_records(ws.tasks, Task)
        seen: dict[str, Task] = {}
        for t in tasks:
            seen.setdefault(t.task_id, t)
        return list(seen.values())


def _task_ids_from_export(path: str) -> list[str]:
    """Task ids of the training rows of an RL export (verl / HF parquet, jsonl): `extra_info.task_id` of every row whose
    `extra_info.split` is train (a test task, or a train task held out for validation, is never trained on)."""
    import json

    import pyarrow.parquet as pq

    p = Path(path)
    files = sorted(p.rglob("*.parquet")) + sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]
    ids: list[str] = []
    held_out = 0
    for f in files:
        rows = pq.read_table(f).to_pylist() if f.suffix == ".parquet" else [
            json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        for r in rows:
            info = r.get("extra_info")
            info = json.loads(info) if isinstance(info, str) else (info or {})
            if not info.get("task_id"):
                continue
            if str(info.get("split") or "train") != "train":
                held_out += 1
                continue
            ids.append(str(info["task_id"]))
    if held_out and not ids:
        raise VragError(f"{path}: all {held_out} RL rows are of test or validation tasks; training reads train rows only")
    return ids


@dataclass
class RlEnvironment:
    ws: Workspace
    tasks: list[Task]
    pages: dict[str, Page]
    layout: dict[str, list[LayoutBlock]] = field(default_factory=dict)
    searcher: Any = None
    documents: dict[str, Document] = field(default_factory=dict)  # by stem

    @classmethod
    def open(cls, workspace: str | None, data: str | None) -> RlEnvironment:
        if not workspace:
            raise VragError("RL needs a workspace with a corpus, tasks and an index: pass -w WORKSPACE")
        ws = Workspace(workspace)
        tasks = _load_tasks(ws)
        if data:
            wanted = _task_ids_from_export(data)
            by_id = {t.task_id: t for t in tasks}
            missing = [i for i in wanted if i not in by_id]
            if missing and len(missing) == len(wanted):
                raise VragError(f"{data}: none of its {len(wanted)} task ids are in {ws.tasks}; "
                                "export and train from the same workspace")
            tasks = [by_id[i] for i in dict.fromkeys(wanted) if i in by_id]
        if not tasks:
            raise VragError(f"{ws.tasks}: no tasks; run `vrag-data tasks import ... -w {workspace}` first")
        pages = {p.page_id: p for p in read_records(ws.corpus_table("pages"), Page)}
        if not pages:
            raise VragError(f"{ws.corpus}: no pages; run `vrag-data ingest` first")
        layout: dict[str, list[LayoutBlock]] = defaultdict(list)
        if ws.exists(ws.corpus_table("layout")):
            for b in read_records(ws.corpus_table("layout"), LayoutBlock):
                layout[b.page_id].append(b)
        from vrag_data.retrieve import load_index

        docs = {d.stem: d for d in read_records(ws.corpus_table("documents"), Document)}
        return cls(ws, tasks, pages, dict(layout), load_index(ws), docs)

    def image_loader(self, min_pixels: int, max_pixels: int, rule: str = "smart") -> Callable[[ImageRef], Image.Image]:
        """Pages and crops as the policy sees them: the same renderer and pixel budget the environment uses."""
        from vrag_data.env.images import render_image_ref

        return lambda ref: render_image_ref(self.ws, ref, max_pixels=max_pixels, min_pixels=min_pixels,
                                           rule=rule).convert("RGB")
