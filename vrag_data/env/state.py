"""What an episode has seen and done so far (the environment's memory; copied into the Trajectory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vrag_data.env.sanitize import sanitize_text
from vrag_data.schema.records import CropRecord, ReadRequest


@dataclass
class EnvState:
    question: str
    turn: int = 0  # assistant turns taken, invalid ones included
    retrieved_pages: list[str] = field(default_factory=list)  # page ids in the order first shown as images
    selected_pages: list[str] = field(default_factory=list)
    crops: list[CropRecord] = field(default_factory=list)
    # VISOR evidence space: page id -> notes the agent wrote right after seeing the page (and its crop)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    searches: list[dict[str, Any]] = field(default_factory=list)  # {"turn", "queries", "hits", "shown"}
    candidates: list[str] = field(default_factory=list)  # last candidate list (for <select>)
    current_page: str | None = None  # the page a crop applies to by default
    reads: list[ReadRequest] = field(default_factory=list)  # resolved page ids
    read_pages: list[str] = field(default_factory=list)
    query_keys: set[str] = field(default_factory=set)
    n_invalid: int = 0
    invalid_reasons: list[str] = field(default_factory=list)
    last_view: tuple[str, str] | None = None  # (page id, "page" | "crop") shown by the last observation
    forced: bool = False  # the last observation asked for a final answer
    forced_text: str = ""  # the text appended to that observation (context policies may replace it)
    done: bool = False
    status: str | None = None  # a Trajectory FinishStatus once done
    reason: str = ""
    final_answer: str | None = None
    skipped_hits: int = 0  # search hits whose page is missing from the page table

    @property
    def n_searches(self) -> int:
        return len(self.searches)

    def evidence_space(self) -> list[str]:
        """The evidence space as lines "<page id>: <note>", in the order pages were seen."""
        return [f"{sanitize_text(pid)}: {note}" for pid, notes in self.evidence.items() for note in notes]

    def trajectory_fields(self) -> dict[str, Any]:
        """The Trajectory fields this state owns (the runner adds ids, turns, usage, provenance)."""
        return {
            "retrieved_pages": list(self.retrieved_pages),
            "selected_pages": list(self.selected_pages),
            "crops": list(self.crops),
            "evidence_space": self.evidence_space(),
            "final_answer": self.final_answer,
            "status": self.status or "no_answer",
            "reason": self.reason,
            "n_invalid": self.n_invalid,
            "extra": {
                "searches": list(self.searches),
                "reads": [r.model_dump() for r in self.reads],
                "invalid_reasons": list(self.invalid_reasons),
            },
        }
