"""The search interface every retriever implements and the environment consumes."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict


class SearchHit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    page_id: str  # "<stem>_<page>", 1-based
    doc_id: str
    stem: str
    page: int
    score: float

    @property
    def image_file(self) -> str:
        return f"{self.page_id}.jpg"


class Searcher(Protocol):
    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        """One ranked list per query; `doc_stem` restricts the search to one document."""
        ...
