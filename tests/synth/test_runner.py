"""The episode runner: every (task, sample) exactly once, errors recorded, resume, manifest, progress stats."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.episode_script import make_episode, make_tasks
from tests.support.openai_server import Faults, OpenAIServer
from vrag_data.config import EndpointConfig, RoleConfig
from vrag_data.errors import VragError
from vrag_data.ids import traj_id
from vrag_data.schema.records import Provenance, RunManifest, Task, Trajectory
from vrag_data.store.shards import read_table
from vrag_data.synth import done_keys, read_trajectories, run_episodes
from vrag_data.synth.ledger import RunLock, shard_paths
from vrag_data.teacher import RequestCache, TeacherPool


def _traj(task: Task, sample: int, run_id: str = "r1", **kw) -> Trajectory:  # noqa: ANN003
    return Trajectory(traj_id=traj_id(run_id, task.task_id, sample), run_id=run_id, task_id=task.task_id, sample=sample,
                      recipe="test", prompt=[], final_answer=task.answer, provenance=Provenance(recipe="test", policy="oracle"), **kw)


def _keys(run_dir) -> list[tuple[str, int]]:  # noqa: ANN001
    t = read_table(str(run_dir / "trajectories"))
    return list(zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), strict=True))


def test_every_task_sample_once_in_shards(tmp_path):
    tasks = make_tasks(10)
    active, peak = 0, 0

    async def episode(task: Task, sample: int) -> Trajectory:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return _traj(task, sample)

    stats = asyncio.run(run_episodes(tasks, 3, episode, tmp_path / "r1", concurrency=4, progress=False, flush_every=7,
                                     flush_seconds=3600))  # by count only: a loaded machine adds no timed flush
    keys = _keys(tmp_path / "r1")
    assert sorted(keys) == sorted((t.task_id, s) for t in tasks for s in range(3))
    assert 2 <= len(shard_paths(tmp_path / "r1")) <= 5  # flushed as they finish, in batches of >= 7
    assert peak == 4
    assert (stats.planned, stats.finished, stats.skipped, stats.answered) == (30, 30, 0, 30)


def test_a_failing_episode_is_recorded_and_the_run_goes_on(tmp_path):
    tasks = make_tasks(6)

    async def episode(task: Task, sample: int) -> Trajectory:
        if task.task_id == "t_00002":
            raise RuntimeError("teacher said\nsomething odd")
        if task.task_id == "t_00004":
            return _traj(tasks[0], sample)  # a buggy episode returning the wrong key
        return _traj(task, sample)

    stats = asyncio.run(run_episodes(tasks, 1, episode, tmp_path / "r1", progress=False))
    by_task = {t.task_id: t for t in read_trajectories(tmp_path / "r1")}
    assert len(by_task) == 6 and stats.errors == 2
    assert by_task["t_00002"].status == "error" and by_task["t_00002"].reason == "RuntimeError: teacher said something odd"
    assert by_task["t_00004"].status == "error" and "another (task, sample)" in by_task["t_00004"].reason
    assert stats.error_reasons == {"RuntimeError: teacher said something odd": 1, "episode returned a trajectory for another (task, sample)": 1}


def test_resume_runs_only_missing_keys(tmp_path):
    tasks = make_tasks(8)
    ran: list[tuple[str, int]] = []

    async def episode(task: Task, sample: int) -> Trajectory:
        ran.append((task.task_id, sample))
        return _traj(task, sample)

    asyncio.run(run_episodes(tasks[:5], 2, episode, tmp_path / "r1", progress=False))
    ran.clear()
    stats = asyncio.run(run_episodes(tasks, 2, episode, tmp_path / "r1", progress=False))
    assert sorted(ran) == sorted((t.task_id, s) for t in tasks[5:] for s in range(2))
    assert (stats.skipped, stats.finished) == (10, 6)
    keys = _keys(tmp_path / "r1")
    assert len(keys) == len(set(keys)) == 16


def test_errored_episodes_are_retried_on_rerun_and_the_newest_record_wins(tmp_path):
    tasks = make_tasks(3)
    down = True

    async def episode(task: Task, sample: int) -> Trajectory:
        if down and task.task_id == "t_00001":
            raise ConnectionError("endpoint down")
        return _traj(task, sample)

    asyncio.run(run_episodes(tasks, 1, episode, tmp_path / "r1", progress=False))
    assert asyncio.run(run_episodes(tasks, 1, episode, tmp_path / "r1", progress=False, retry_errors=False)).finished == 0
    down = False
    stats = asyncio.run(run_episodes(tasks, 1, episode, tmp_path / "r1", progress=False))
    assert stats.finished == 1
    trajs = read_trajectories(tmp_path / "r1")
    assert len(trajs) == 3 and all(t.status == "answered" for t in trajs)
    assert done_keys(tmp_path / "r1") == {(t.task_id, 0) for t in tasks}


def test_half_written_shards_never_count(tmp_path):
    tasks = make_tasks(2)

    async def episode(task: Task, sample: int) -> Trajectory:
        return _traj(task, sample)

    d = tmp_path / "r1" / "trajectories"
    d.mkdir(parents=True)
    (d / ".tmp-deadbeef-part-000000.parquet").write_bytes(b"PAR1 half a shard")
    asyncio.run(run_episodes(tasks, 1, episode, tmp_path / "r1", progress=False))
    assert len(read_trajectories(tmp_path / "r1")) == 2


def test_manifest_is_written_without_secrets(tmp_path):
    secret = "sk-live-planted-123"
    manifest = RunManifest(run_id="r1", recipe="test", config={"roles": {"policy": {"api_key_env": "OPENAI_API_KEY", "api_key": secret}}},
                           config_hash="h", code_version="0", workspace=str(tmp_path))

    async def episode(task: Task, sample: int) -> Trajectory:
        return _traj(task, sample, status="max_turns", n_invalid=1, turns=[])

    asyncio.run(run_episodes(make_tasks(4), 1, episode, tmp_path / "r1", progress=False, manifest=manifest))
    text = (tmp_path / "r1" / "manifest.json").read_text()
    assert secret not in text
    m = json.loads(text)
    assert m["status"] == "finished" and m["n_tasks"] == 4 and m["config"]["roles"]["policy"]["api_key_env"] == "OPENAI_API_KEY"
    assert m["stats"]["finished"] == 4 and m["stats"]["finish_rate"] == 0.0


def test_one_writer_per_run_folder(tmp_path):
    async def episode(task: Task, sample: int) -> Trajectory:
        return _traj(task, sample)

    with RunLock(tmp_path / "r1"), pytest.raises(VragError, match="another process is writing this run"):
        asyncio.run(run_episodes(make_tasks(1), 1, episode, tmp_path / "r1", progress=False))


def test_flaky_teacher_run_finishes_with_a_status_for_every_episode(tmp_path):
    faults = Faults(p500=0.2, p429=0.05, p_drop=0.03, p_truncate=0.03, p_empty=0.03, spike_p=0.05, spike_s=0.3)
    with OpenAIServer(faults=faults, seed=7) as srv:
        role = RoleConfig(endpoints=[EndpointConfig(base_url=srv.base_url, model="teacher")], max_retries=1, backoff_s=0.01, backoff_max_s=0.02)
        run_dir = tmp_path / "r1"
        pool = TeacherPool({"policy": role}, RequestCache(run_dir), "r1")

        async def go():  # noqa: ANN202
            async with pool:
                return await run_episodes(make_tasks(30), 1, make_episode(pool, "r1", 3), run_dir, concurrency=8, progress=True, pool=pool)

        stats = asyncio.run(go())
    trajs = read_trajectories(run_dir)
    assert len(trajs) == 30 and stats.finished == 30
    assert {t.status for t in trajs} <= {"answered", "error"}
    errors = [t for t in trajs if t.status == "error"]
    assert stats.errors == len(errors) and all(t.reason.startswith("TeacherError: role policy") for t in errors)
    # ~36% of attempts fail: with one retry about a third of the 3-call episodes end in error (P(none) ~ 1e-5)
    assert 0 < len(errors) < 30
    assert all("gave up after 2 attempts" in t.reason for t in errors)  # retries stay bounded
    log = read_table(str(run_dir / "requests")).to_pylist()
    assert {r["status"] for r in log} <= {"ok", "error"} and len([r for r in log if r["status"] == "error"]) >= len(errors)


def test_an_episode_over_its_time_budget_ends_in_error(tmp_path):
    async def episode(task: Task, sample: int) -> Trajectory:
        if task.task_id == "t_00000":
            await asyncio.sleep(30)
        return _traj(task, sample)

    stats = asyncio.run(run_episodes(make_tasks(3), 1, episode, tmp_path / "r1", progress=False, episode_timeout_s=0.2))
    by_task = {t.task_id: t for t in read_trajectories(tmp_path / "r1")}
    assert stats.errors == 1 and by_task["t_00000"].status == "error" and by_task["t_00000"].reason.startswith("TimeoutError")
    assert by_task["t_00001"].status == "answered"
