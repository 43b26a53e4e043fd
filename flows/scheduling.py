"""Submit shard tasks in lanes under a concurrency limit.

A lane is a sequence of submissions that must not overlap (the task shards of one recipe append to one run
folder, which has a single writer); lanes run side by side, at most `limit` tasks in flight overall
(`runner.max_concurrency`). A failed item does not stop its lane: the next shard still runs, and the states
say which ones failed. A submission may return None instead of a future (nothing to do, e.g. no export
without a filtered run); its state is then None.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from prefect.futures import PrefectFuture, as_completed
from prefect.states import State

Submit = Callable[[], "PrefectFuture[Any] | None"]


def run_lanes(lanes: Sequence[Sequence[Submit]], limit: int,
              on_done: Callable[[int, int, State | None], None] | None = None) -> list[list[State | None]]:
    """`on_done(lane, item, state)` is called as each item ends (None = skipped), before the lane's next item
    is submitted, so a later item can look at the outcome of an earlier one."""
    states: list[list[State | None]] = [[None] * len(lane) for lane in lanes]
    cursor = [0] * len(lanes)
    ready = deque(i for i, lane in enumerate(lanes) if lane)
    in_flight: dict[PrefectFuture[Any], tuple[int, int]] = {}
    while ready or in_flight:
        while ready and len(in_flight) < max(1, limit):
            i = ready.popleft()
            submitted = lanes[i][cursor[i]]()
            if submitted is None:  # skipped: move on in this lane
                if on_done is not None:
                    on_done(i, cursor[i], None)
                cursor[i] += 1
                if cursor[i] < len(lanes[i]):
                    ready.append(i)
                continue
            in_flight[submitted] = (i, cursor[i])
        if not in_flight:
            continue
        fut = next(as_completed(list(in_flight)))
        i, j = in_flight.pop(fut)
        fut.wait()
        states[i][j] = fut.state
        if on_done is not None:
            on_done(i, j, fut.state)
        cursor[i] += 1
        if cursor[i] < len(lanes[i]):
            ready.append(i)
    return states


def run_bounded(items: Sequence[Submit], limit: int) -> list[State | None]:
    """Independent submissions (one lane each), at most `limit` at once; states in submission order."""
    return [lane[0] for lane in run_lanes([[s] for s in items], limit)]
