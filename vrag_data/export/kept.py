"""Which trajectories of a run are kept: those with verdicts that all passed (the rules live in
`vrag_data.store.run`: newest record per episode, augmented trajectories inherit their source's verdicts; a
run without any verdict file keeps every trajectory with status "answered")."""

from __future__ import annotations

from collections.abc import Iterator

from vrag_data.schema.records import Trajectory
from vrag_data.store.run import RunDir, Verdicts

__all__ = ["Verdicts", "count_trajectories", "iter_trajectories", "kept_trajectories"]


def count_trajectories(run_dir: str) -> int:
    return RunDir(run_dir).count()


def iter_trajectories(run_dir: str) -> Iterator[Trajectory]:
    """Every trajectory the export sees: newest episode records, then augmented ones."""
    return RunDir(run_dir).trajectories()


def kept_trajectories(run_dir: str) -> list[Trajectory]:
    rd = RunDir(run_dir)
    v = rd.verdicts()
    return [t for t in rd.trajectories() if v.keep(t)]
