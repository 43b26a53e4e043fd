"""Crash and resume: kill -9 a synthesis run (twice, at different points), interrupt it, restart it.

The final trajectory set equals that of an uninterrupted run (same keys, no duplicates, none missing),
and the server never sees again a request whose response had reached the cache before the kill.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.openai_server import Faults, OpenAIServer
from vrag_data.store.shards import read_table
from vrag_data.synth.ledger import read_manifest, shard_paths

REPO = Path(__file__).resolve().parents[2]
TASKS, SAMPLES, TURNS = 40, 2, 3


def _start(run_dir: Path, base_url: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "tests.support.episode_script", "--run-dir", str(run_dir), "--base-url", base_url,
            "--tasks", str(TASKS), "--samples", str(SAMPLES), "--turns", str(TURNS), "--concurrency", "8", "--flush-every", "4"]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cached_request_ids(run_dir: Path) -> set[str]:
    db = sqlite3.connect(run_dir / "requests.sqlite")
    try:
        return {"rq_" + k[:24] for (k,) in db.execute("SELECT key FROM responses")}
    finally:
        db.close()


def _wait_for_shards(proc: subprocess.Popen[str], run_dir: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(shard_paths(run_dir)) < n:
        assert proc.poll() is None, f"run ended before it could be interrupted: {proc.communicate()}"
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.005)


@pytest.mark.soak
def test_kill_9_and_sigint_then_resume_loses_nothing_and_repays_nothing(tmp_path):
    run_dir = tmp_path / "runs" / "crashy"
    with OpenAIServer(reply=lambda req: f"step {len(req['messages'])}", faults=Faults(latency_s=0.01)) as srv:
        phases: list[tuple[set[str], list[str]]] = []  # (cached at the interruption, requests seen before it)
        for need, how in ((1, signal.SIGKILL), (4, signal.SIGKILL), (8, signal.SIGINT)):
            proc = _start(run_dir, srv.base_url)
            _wait_for_shards(proc, run_dir, need)
            proc.send_signal(how)
            proc.communicate(timeout=30)
            phases.append((_cached_request_ids(run_dir), srv.request_ids()))
            if how == signal.SIGINT:  # an interrupted run says so, and is resumable, not failed
                assert read_manifest(run_dir).status == "running"
        srv.clear()
        proc = _start(run_dir, srv.base_url)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        final_seen = srv.request_ids()

    # The interrupted runs really were interrupted, and each restart made progress.
    assert len(phases[0][0]) < TASKS * SAMPLES * TURNS
    # Exactly once: the keys of an uninterrupted run, no duplicates.
    t = read_table(str(run_dir / "trajectories"))
    keys = list(zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), strict=True))
    assert len(keys) == len(set(keys)) == TASKS * SAMPLES
    assert set(t.column("status").to_pylist()) == {"answered"}
    # No finished request paid twice: what the server saw after each interruption excludes what was cached.
    seen_after = [phases[1][1][len(phases[0][1]):], phases[2][1][len(phases[1][1]):], final_seen]
    for (cached, _), later in zip(phases, seen_after, strict=True):
        assert not cached & set(later)
    # Every teacher call of the final set is in the cache; re-issued ones were only those in flight.
    total_calls = TASKS * SAMPLES * TURNS
    issued = len(phases[2][1]) + len(final_seen)
    assert len(_cached_request_ids(run_dir)) == total_calls
    assert issued - total_calls <= 3 * 8  # at most the in-flight calls (8 episodes) per interruption
    stats = json.loads(out.split("DONE ", 1)[1])
    assert stats["skipped"] + stats["finished"] == TASKS * SAMPLES
    assert read_manifest(run_dir).status == "finished"
