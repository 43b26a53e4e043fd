"""The tasks stage's question generation tops up to the config's count: `tasks.generate.n` is the number of generated
questions the workspace holds for this config, not a number to add on every run.

The questions already generated that fit the config (its split, kinds, reasoning types and sources) count; only the
shortfall is generated (`generate_tasks(new_only=True)`), so a re-run after the roles changed (another writer model,
another judge, other sampling) adds none, and raising `n` adds the difference. `vrag-data tasks generate --n N`
stays what it says: N tasks asked for now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vrag_data.config import GenerateConfig, RunConfig
from vrag_data.schema.records import Task
from vrag_data.store import Workspace, read_records
from vrag_data.tasks.store import shard_path

if TYPE_CHECKING:
    from vrag_data.qgen.run_records import GenerateSummary

GENERATED_SHARD = "generated"  # where `vrag_data.qgen.generate` writes its tasks


def fits(task: Task, gcfg: GenerateConfig) -> bool:
    """Whether a generated task is one this generate config asks for."""
    return (task.split == gcfg.split and task.hop_type in gcfg.kinds
            and (task.reasoning_type is None or task.reasoning_type in gcfg.types)
            and set(task.sources) <= set(gcfg.sources))


def generated_for(ws: Workspace, gcfg: GenerateConfig) -> int:
    """The generated tasks of the workspace that fit `gcfg`."""
    return sum(fits(t, gcfg) for t in read_records(shard_path(ws, GENERATED_SHARD), Task))


@dataclass(frozen=True)
class TopUp:
    target: int  # tasks.generate.n
    had: int  # generated tasks that fit the config before this run
    added: int  # new tasks this run kept
    summary: GenerateSummary | None  # the generator's GenerateSummary; None when nothing was missing

    @property
    def total(self) -> int:
        return self.had + self.added


def top_up(ws: Workspace, cfg: RunConfig, writer: Literal["model", "oracle"],
           progress: Callable[[int, int], None] | None = None) -> TopUp:
    """Generate the questions `cfg.tasks.generate` still lacks in `ws` (none when it holds `n` of them already).
    The attempt budget is the whole target's (`max_attempts`, default 6 x n): earlier tasks the writer meets again
    take attempts without counting."""
    from vrag_data.qgen.generate import generate_tasks

    gcfg = cfg.tasks.generate
    had = generated_for(ws, gcfg)
    need = gcfg.n - had
    if need <= 0:
        return TopUp(gcfg.n, had, 0, None)
    budget = gcfg.max_attempts or 6 * gcfg.n
    run_cfg = cfg.model_copy(update={"tasks": cfg.tasks.model_copy(update={
        "generate": gcfg.model_copy(update={"n": need, "max_attempts": budget})})})
    s = generate_tasks(ws, run_cfg, writer=writer, progress=progress, new_only=True)
    return TopUp(gcfg.n, had, s.kept, s)
