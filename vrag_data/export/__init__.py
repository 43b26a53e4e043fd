"""Exports: HF datasets, LLaMA-Factory sharegpt, verl parquet, EasyR1 jsonl (DESIGN.md "Exports")."""

from vrag_data.export.conversation import AlternationError, Conversation, trajectory_to_conversation
from vrag_data.export.kept import kept_trajectories
from vrag_data.export.formats import FORMAT_NAMES as FORMATS
from vrag_data.export.runner import ExportSummary, export_run

__all__ = [
    "FORMATS",
    "AlternationError",
    "Conversation",
    "ExportSummary",
    "export_run",
    "kept_trajectories",
    "trajectory_to_conversation",
]
