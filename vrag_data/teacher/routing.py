"""Episode-affine routing: which replica of a role answers a call (pure decision + a small episode table).

A multi-turn episode re-sends its whole, growing history every turn; a server's prefix cache only helps when
the next turn lands on the replica that holds the previous one. So a call that names its episode goes to the
replica that served the episode's previous call ("home") while that replica has a free slot and its load is
within `bound` x the least loaded; otherwise the episode moves to the least loaded replica and that replica
becomes its new home (it moves once, it does not bounce back and forth per call). Calls without an episode
key, and the first call of an episode, go to the least loaded replica.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

DEFAULT_BOUND = 1.25


def least_loaded(loads: Sequence[float], free: Sequence[bool], start: int = 0) -> int | None:
    """Index of the least loaded replica with a free slot (ties: the first from `start`, rotating), or None."""
    n = len(loads)
    best: int | None = None
    for k in range(n):
        i = (start + k) % n
        if free[i] and (best is None or loads[i] < loads[best]):
            best = i
    return best


def route(loads: Sequence[float], free: Sequence[bool], home: int | None, bound: float = DEFAULT_BOUND,
          start: int = 0) -> int | None:
    """The replica for the next call: `home` if it has a free slot and `loads[home] <= bound * min(loads)`
    (loads compared as given; pass in-flight + 1 over capacity so an idle fleet compares finite numbers),
    else the least loaded replica with a free slot. None when no replica has a free slot."""
    if bound < 1.0:
        raise ValueError(f"affinity bound must be >= 1.0 (got {bound})")
    if home is not None and 0 <= home < len(loads) and free[home]:
        low = min(loads)
        if loads[home] <= bound * low:
            return home
    return least_loaded(loads, free, start)


class AffinityTable:
    """episode key -> home replica index, bounded (least recently used keys are forgotten), with counters."""

    def __init__(self, max_keys: int = 65536) -> None:
        self._home: OrderedDict[str, int] = OrderedDict()
        self._max = max_keys
        self.stays = 0  # calls that went to their episode's home
        self.moves = 0  # calls that moved their episode to another replica
        self.new = 0  # first calls of an episode

    def home(self, key: str) -> int | None:
        h = self._home.get(key)
        if h is not None:
            self._home.move_to_end(key)
        return h

    def record(self, key: str, chosen: int) -> None:
        prev = self._home.get(key)
        if prev is None:
            self.new += 1
        elif prev == chosen:
            self.stays += 1
        else:
            self.moves += 1
        self._home[key] = chosen
        self._home.move_to_end(key)
        if len(self._home) > self._max:
            self._home.popitem(last=False)

    def forget(self, key: str) -> None:
        self._home.pop(key, None)

    def stats(self) -> dict[str, int]:
        return {"episodes": len(self._home), "stays": self.stays, "moves": self.moves, "new": self.new}
