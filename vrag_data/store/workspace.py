"""One directory holds a project's state (DESIGN.md "Workspace"). Paths may be fsspec URLs."""

from __future__ import annotations

from dataclasses import dataclass

import fsspec
from fsspec.core import url_to_fs


@dataclass(frozen=True)
class Workspace:
    root: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", str(self.root).rstrip("/"))

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return url_to_fs(self.root)[0]

    @property
    def is_local(self) -> bool:
        return "://" not in self.root or self.root.startswith("file://")

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    @property
    def pages(self) -> str:
        return self.path("pages")

    @property
    def corpus(self) -> str:
        return self.path("corpus")

    @property
    def index(self) -> str:
        return self.path("index")

    @property
    def tasks(self) -> str:
        return self.path("tasks")

    @property
    def runs(self) -> str:
        return self.path("runs")

    @property
    def exports(self) -> str:
        return self.path("exports")

    @property
    def report_db(self) -> str:
        return self.path("report.duckdb")

    @property
    def report_html(self) -> str:
        return self.path("report.html")

    def run(self, run_id: str) -> str:
        return self.path("runs", run_id)

    def export_dir(self, run_id: str) -> str:
        """Where the pipeline exports a run (`exports/<run_id>`)."""
        return self.path("exports", run_id)

    def export_summary(self, run_id: str) -> str:
        """The file an export of the run writes last (`exports/<run_id>/summary.json`)."""
        return self.path("exports", run_id, "summary.json")

    def index_manifest(self, retriever: str) -> str:
        """The manifest an index build of `retriever` writes (`index/<retriever>/manifest.json`)."""
        return self.path("index", retriever, "manifest.json")

    @property
    def generate_manifest(self) -> str:
        """What `tasks generate` records of its last run (`tasks/generate_manifest.json`)."""
        return self.path("tasks", "generate_manifest.json")

    def task_shard(self, name: str) -> str:
        """A shard of the tasks table (`tasks/<name>.parquet`)."""
        return self.path("tasks", f"{name}.parquet")

    def source(self, name: str) -> str:
        """A folder of source documents the pipeline writes itself (`sources/<name>`: the sample corpus)."""
        return self.path("sources", name)

    @property
    def orchestrator_results(self) -> str:
        """Where the orchestrator keeps its task results (`.prefect/results`)."""
        return self.path(".prefect", "results")

    def page_image(self, page_id: str) -> str:
        return self.path("pages", f"{page_id}.jpg")

    def corpus_table(self, name: str) -> str:
        """`documents`, `pages`, `layout`: folders of per-document shards `corpus/<name>/<stem>.parquet`;
        `errors`: the single file `corpus/errors.parquet`. `read_table`/`read_records` accept either."""
        if name == "errors":
            return self.path("corpus", "errors.parquet")
        return self.path("corpus", name)

    def makedirs(self) -> "Workspace":
        fs = self.fs
        for sub in ("pages", "corpus", "index", "tasks", "runs", "exports"):
            fs.makedirs(self.path(sub), exist_ok=True)
        return self

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)
