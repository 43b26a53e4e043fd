"""Which evidence a generation attempt gets: a fresh draw from the pool, skipping evidence the writer already
declined for the question type in this run (and, for a writer that can tell up front, evidence it cannot write
for), so the attempt budget goes where a task can still come from."""

from __future__ import annotations

import random
from collections.abc import Callable

from vrag_data.qgen.evidence import Evidence, EvidencePool

# a writer's answer about the evidence itself (nothing there for this question type), not about one try of it
BARREN = frozenset({"writer_declined", "untitled_table", "table_malformed", "unnamed_document"})
REPICKS = 24  # draws of other evidence before a barren one is tried again


def evidence_key(ev: Evidence, qtype: str) -> tuple[str, ...]:
    return (ev.kind, qtype, *sorted(r.block.block_id for r in ev.regions))


def fresh_pick(pool_ev: EvidencePool, kind: str, qtype: str, seed: str, barren: set[tuple[str, ...]],
               viable: Callable[[Evidence, str], bool] | None = None) -> Evidence:
    """Evidence of `kind` the writer has not declined for `qtype` in this run (and, for a writer that can tell up
    front, one it can write for), when a few draws find some: the attempt budget goes to evidence that can still
    give a task, not to pairs already found empty. After `REPICKS` draws the last one is tried anyway."""
    ev = None
    for k in range(REPICKS):
        ev = pool_ev.pick(kind, random.Random(seed if k == 0 else f"{seed}:{k}"))
        assert ev is not None  # kinds were filtered by pool_ev.possible
        key = evidence_key(ev, qtype)
        if key in barren:
            continue
        if viable is None or viable(ev, qtype):
            return ev
        barren.add(key)
    assert ev is not None
    return ev
