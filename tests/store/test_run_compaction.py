"""Compaction through the run-folder owner: readers see the same newest episodes before and after, a killed
compaction loses nothing, resume and exactly-once are unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.rewards_factory import make_task, make_traj
from vrag_data.schema.records import Trajectory
from vrag_data.store import write_records
from vrag_data.store.run import RunDir
from vrag_data.synth.ledger import done_keys, next_shard_index, shard_path

TASK = make_task()


def episode(sample: int, answer: str, status: str = "answered") -> Trajectory:
    t = make_traj(TASK, [("search", "q", ["doc_3"]), ("answer", answer)], sample=sample)
    return t.model_copy(update={"status": status, "traj_id": f"{t.traj_id}-{answer}"})


def write_shards(run: Path, shards: list[list[Trajectory]]) -> None:
    for recs in shards:
        write_records(str(shard_path(run, next_shard_index(run))), recs, Trajectory)


def view(rd: RunDir) -> list[tuple[int, str, str]]:
    return sorted((t.sample, t.traj_id, t.status) for t in rd.episodes())


def test_compaction_keeps_the_newest_episodes_and_resume_continues(tmp_path):
    run = tmp_path / "r"
    # sample 1 errored first and was re-run; sample 2 appears once
    write_shards(run, [[episode(0, "a"), episode(1, "x", "error")], [episode(1, "b")], [episode(2, "c")]])
    rd = RunDir(str(run))
    before = view(rd)
    assert [s for s, _, _ in before] == [0, 1, 2] and before[1][2] == "answered"
    res = rd.compact()
    assert (res.shards, res.rows) == (3, 3)  # the superseded error record is dropped
    assert [Path(f).name for f in rd.part_files()] == ["part-000002~merged.parquet"]
    assert view(rd) == before and done_keys(run) == {(TASK.task_id, 0), (TASK.task_id, 1), (TASK.task_id, 2)}
    # a resumed synth writes after the merged shard and still wins over it
    assert next_shard_index(run) == 3
    write_shards(run, [[episode(2, "d")], [episode(3, "e")]])
    assert {t.sample: t.traj_id.rsplit("-", 1)[1] for t in rd.episodes()} == {0: "a", 1: "b", 2: "d", 3: "e"}
    second = rd.compact()
    assert second.shards == 2 and len(rd.part_files()) == 2
    assert {t.sample: t.traj_id.rsplit("-", 1)[1] for t in rd.episodes()} == {0: "a", 1: "b", 2: "d", 3: "e"}
    assert rd.compact().shards == 0  # nothing left to merge


def test_a_killed_compaction_loses_nothing(tmp_path):
    run = tmp_path / "r"
    write_shards(run, [[episode(0, "a")], [episode(1, "x", "error")], [episode(1, "b")]])
    expected = view(RunDir(str(run)))
    # state after a kill between "merged shard in place" and "originals removed": both present
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    RunDir(str(copy)).compact()
    merged = next(p for p in (copy / "trajectories").iterdir() if "~merged" in p.name)
    shutil.copy(merged, run / "trajectories" / merged.name)
    rd = RunDir(str(run))
    assert view(rd) == expected  # duplicates are harmless: the merged shard sorts after what it covers
    res = rd.compact()
    assert res.removed_leftovers == 3 and view(rd) == expected
    # a kill while writing the merged shard: only a temporary file is left, which readers ignore
    (run / "trajectories" / ".tmp-999-part-000009~merged.parquet").write_bytes(b"partial")
    assert view(rd) == expected


@pytest.mark.slow
def test_kill_9_during_compaction_keeps_every_episode(tmp_path):
    run = tmp_path / "r"
    write_shards(run, [[episode(i, f"v{i}")] for i in range(40)])
    expected = view(RunDir(str(run)))
    code = textwrap.dedent(f"""
        import os, signal
        import vrag_data.store.run as r
        real = os.remove
        def remove(p):  # die after the merged shard is in place, halfway through removing the originals
            if "part-000020.parquet" in str(p):
                os.kill(os.getpid(), signal.SIGKILL)
            real(p)
        r.os.remove = remove
        r.RunDir({str(run)!r}).compact()
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == -9
    rd = RunDir(str(run))
    assert view(rd) == expected
    rd.compact()
    assert view(rd) == expected and len(rd.part_files()) == 1
