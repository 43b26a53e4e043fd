"""What a generation run records: a row per rejected attempt (`tasks/generate_rejections.parquet`, this run's rows
replaced on a re-run, other runs' kept) and the run's summary (counts, causes, the per-kind and per-document tally)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.qgen.tally import Tally
from vrag_data.schema.records import utcnow
from vrag_data.store import Workspace, read_records, write_records

REJECTIONS_FILE = "generate_rejections.parquet"


class Rejection(BaseModel):
    """Why one generation attempt produced no task."""

    model_config = ConfigDict(extra="forbid")
    run_id: str
    attempt: int
    kind: str
    qtype: str
    sources: list[str] = Field(default_factory=list)
    evidence_pages: list[str] = Field(default_factory=list)
    stage: str  # pick | writer | check | dedup | verify
    reason: str
    detail: str = ""
    question: str = ""
    answer: str = ""
    writer: str = ""
    requests: int = 0
    at: datetime = Field(default_factory=utcnow)


class GenerateSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    writer: str
    verify_mode: str
    attempted: int = 0
    target: int = 0  # tasks asked for (--n)
    kept: int = 0  # new tasks written
    already: int = 0  # distinct tasks of an earlier identical run, found again
    stored: int = 0  # rows of tasks/generated.parquet after this run
    rejected: dict[str, int] = Field(default_factory=dict)  # reason -> count
    by_kind: dict[str, int] = Field(default_factory=dict)
    by_type: dict[str, int] = Field(default_factory=dict)
    by_source: dict[str, int] = Field(default_factory=dict)
    calls: int = 0  # teacher calls, cache hits included
    requests: int = 0  # calls that went to a server
    shard: str = ""
    rejections_file: str = ""
    notices: list[str] = Field(default_factory=list)  # what the writer cannot do here, said once
    tally: Tally = Field(default_factory=Tally)  # asked / kept per kind and per document, rejections per kind

    @property
    def shortfall(self) -> int:
        return max(0, self.target - self.kept - self.already)

    @property
    def yield_rate(self) -> float:
        return (self.kept + self.already) / self.attempted if self.attempted else 0.0

    @property
    def calls_per_task(self) -> float:
        done = self.kept + self.already
        return self.calls / done if done else float("nan")


def record_rejections(ws: Workspace, run_id: str, rows: list[Rejection]) -> str:
    path = f"{ws.tasks}/{REJECTIONS_FILE}"
    others = [r for r in read_records(path, Rejection) if r.run_id != run_id]
    write_records(path, [*others, *rows], Rejection)
    return path


def load_rejections(ws: Workspace) -> list[Rejection]:
    return read_records(f"{ws.tasks}/{REJECTIONS_FILE}", Rejection)
