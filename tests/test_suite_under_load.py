"""The tests that depend on scheduling (routing over replicas, in-flight bounds, a busy replica, signals) pass while
four processes keep every core busy: they count events (a server holds requests until released) instead of racing
a latency. `make test-soak` runs this; bench/RESULTS.md has the figures of the whole suite under load."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOGS = 4
SENSITIVE = [
    "tests/teacher/test_teacher_pool.py::test_least_loaded_routing_spreads_load_over_two_replicas",
    "tests/teacher/test_teacher_pool.py::test_busy_replica_gets_fewer_requests",
    "tests/teacher/test_teacher_pool.py::test_in_flight_bound_per_endpoint",
    "tests/test_bounds_and_signals.py::test_sigterm_stops_a_running_synth_within_seconds_and_the_run_resumes",
]


def _hog(stop: "mp.synchronize.Event") -> None:  # a busy loop: one core's worth of load
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


@pytest.mark.soak
@pytest.mark.slow
def test_scheduling_sensitive_tests_pass_while_every_core_is_busy(tmp_path):
    stop = mp.Event()
    hogs = [mp.Process(target=_hog, args=(stop,), daemon=True) for _ in range(HOGS)]
    for h in hogs:
        h.start()
    try:
        for round_ in range(3):  # three times in a row: a race would show up
            res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SENSITIVE],
                                 cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                                 timeout=1800)
            assert res.returncode == 0, f"round {round_}: {res.stdout[-3000:]}{res.stderr[-2000:]}"
            assert f"{len(SENSITIVE)} passed" in res.stdout, res.stdout[-2000:]
    finally:
        stop.set()
        for h in hogs:
            h.join(10)
