"""A small synthesis run in its own process, for crash/resume tests and the orchestration bench.

`python -m tests.support.episode_script --run-dir D --base-url URL --tasks 40 --samples 2 --turns 3`
runs `run_episodes` over synthetic tasks; each episode makes `--turns` teacher calls (each prompt carries
the previous reply, so a turn cannot be issued before the one before it finished) and answers. Kill it
at any point and start it again: it must resume without duplicates and without re-issuing a request
whose response reached the cache. Prints `DONE <json stats>` when finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from vrag_data.config import EndpointConfig, RoleConfig
from vrag_data.ids import traj_id
from vrag_data.schema.records import Action, Message, Provenance, RunManifest, Task, Trajectory, Turn, Usage
from vrag_data.synth.runner import run_episodes
from vrag_data.teacher import RequestCache, TeacherPool


def make_tasks(n: int) -> list[Task]:
    return [Task(task_id=f"t_{i:05d}", question=f"What is item {i}?", answer=str(i), doc_ids=["d"], doc_stems=["doc"]) for i in range(n)]


def make_episode(pool: TeacherPool, run_id: str, turns: int):  # noqa: ANN201
    async def episode(task: Task, sample: int) -> Trajectory:
        prompt = [Message(role="system", text="Answer with <answer>."), Message(role="user", text=task.question)]
        msgs = list(prompt)
        out: list[Turn] = []
        usage = Usage()
        t0 = time.perf_counter()
        for i in range(turns):
            res = await pool.chat("policy", msgs, sample=sample)
            usage.requests += 1
            usage.cache_hits += res.cached
            usage.retries += res.retries
            usage.prompt_tokens += res.prompt_tokens
            usage.completion_tokens += res.completion_tokens
            kind = "answer" if i == turns - 1 else "search"
            out.append(Turn(idx=i, assistant=res.text, action=Action(kind=kind, query=task.question), request_ids=[res.request_id]))
            msgs += [Message(role="assistant", text=res.text), Message(role="user", text=f"observation {i}")]
        return Trajectory(
            traj_id=traj_id(run_id, task.task_id, sample), run_id=run_id, task_id=task.task_id, sample=sample, recipe="test",
            prompt=prompt, turns=out, final_answer=task.answer, status="answered", usage=usage,
            latency_s=time.perf_counter() - t0, provenance=Provenance(recipe="test", policy="model", models=pool.models()),
        )

    return episode


async def main_async(a: argparse.Namespace) -> None:
    run_dir = Path(a.run_dir)
    run_id = run_dir.name
    role = RoleConfig(endpoints=[EndpointConfig(base_url=a.base_url, model="teacher", max_in_flight=a.max_in_flight)],
                      backoff_s=0.01, backoff_max_s=0.2, max_retries=8, timeout_s=30)
    pool = TeacherPool({"policy": role}, RequestCache(run_dir), run_id)
    manifest = RunManifest(run_id=run_id, recipe="test", config={"roles": {"policy": role.model_dump(mode="json")}}, config_hash="x",
                           code_version="test", workspace=str(run_dir.parent))
    async with pool:
        await pool.check()
        stats = await run_episodes(make_tasks(a.tasks), a.samples, make_episode(pool, run_id, a.turns), run_dir,
                                   concurrency=a.concurrency, progress=False, flush_every=a.flush_every, flush_seconds=a.flush_seconds,
                                   recipe="test", pool=pool, manifest=manifest)
    print("DONE " + json.dumps({**stats.as_dict(), "pool": {k: v for k, v in pool.stats().items() if k != "endpoints"}}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-in-flight", type=int, default=256)
    ap.add_argument("--flush-every", type=int, default=8)
    ap.add_argument("--flush-seconds", type=float, default=1.0)
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
