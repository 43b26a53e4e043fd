"""Exports: HF datasets, LLaMA-Factory sharegpt, verl parquet, EasyR1 jsonl, and any format a package announces
(DESIGN.md "Exports"; the protocol and the registry are in `vrag_data.export.formats`).

`export_run` and `ExportSummary` load on first use: the writers pull in `datasets` (~0.8 s of imports), which
every other command (and `format_names()`, which imports no writer) does not need."""

from vrag_data.export.conversation import AlternationError, Conversation, trajectory_to_conversation
from vrag_data.export.formats import Format, format_names, register_format, resolve_formats
from vrag_data.export.kept import kept_trajectories

__all__ = [
    "AlternationError",
    "Conversation",
    "ExportSummary",
    "Format",
    "export_run",
    "format_names",
    "kept_trajectories",
    "register_format",
    "resolve_formats",
    "trajectory_to_conversation",
]


def __getattr__(name: str) -> object:
    if name in ("ExportSummary", "export_run"):
        from vrag_data.export import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
