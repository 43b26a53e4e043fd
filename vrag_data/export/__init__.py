"""Exports: HF datasets, LLaMA-Factory sharegpt, verl parquet, EasyR1 jsonl (DESIGN.md "Exports").

`export_run` and `ExportSummary` load on first use: the writers pull in `datasets` (~0.8 s of imports), which
every other command (and `import vrag_data.export.formats` for the format names) does not need."""

from typing import Any

from vrag_data.export.conversation import AlternationError, Conversation, trajectory_to_conversation
from vrag_data.export.formats import FORMAT_NAMES as FORMATS
from vrag_data.export.kept import kept_trajectories

__all__ = [
    "FORMATS",
    "AlternationError",
    "Conversation",
    "ExportSummary",
    "export_run",
    "kept_trajectories",
    "trajectory_to_conversation",
]


def __getattr__(name: str) -> Any:
    if name in ("ExportSummary", "export_run"):
        from vrag_data.export import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
