"""Orchestration efficiency: does the client keep a slow teacher server saturated, cheaply, and resume for free?

The server (tests/support/openai_server.py, a separate process) answers every request after a fixed
latency, so the ideal throughput is in_flight / latency. We measure:
  1. TeacherPool alone: achieved requests/s over ideal, and client CPU per request (process_time of the
     client process: event loop, JSON, hashing, SQLite commits, request log), without and with two page
     images per request (JPEG data URIs);
  2. the same through run_episodes (2 teacher calls per episode, 256 episodes at once);
  3. kill -9 in the middle of a run, three times, then a restart: how many finished requests were re-issued;
  and, as the ceiling of the moment (the machine may be shared), a bare aiohttp loop against the same server.

Run: .venv/bin/python bench/bench_orchestration.py [--latency 2] [--in-flight 256] [--requests 2048]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_PIXELS = 512 * 28 * 28
sys.path.insert(0, str(REPO))

from tests.support.openai_server import OpenAIServerProcess  # noqa: E402
from vrag_data.config import EndpointConfig, RoleConfig  # noqa: E402
from vrag_data.schema.records import ImageRef, Message, Task  # noqa: E402
from vrag_data.synth.ledger import shard_paths  # noqa: E402
from vrag_data.synth.runner import run_episodes  # noqa: E402
from vrag_data.teacher import RequestCache, TeacherPool  # noqa: E402


def page_jpegs(n: int) -> list[bytes]:
    """Real page renders when the research corpus is beside the repo, else noisy synthetic pages."""
    from PIL import Image

    corpus = REPO.parent / "shared" / "corpus"
    pdfs = sorted(corpus.rglob("*.pdf"))
    out: list[bytes] = []
    if pdfs:
        import pymupdf

        doc = pymupdf.open(pdfs[0])
        for i in range(min(n, doc.page_count)):
            pix = doc[i].get_pixmap(dpi=144)
            img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
            scale = (MAX_PIXELS / (img.width * img.height)) ** 0.5  # VRAG-RL / Qwen2.5-VL budget: 512*28*28 px
            if scale < 1:
                img = img.resize((int(img.width * scale), int(img.height * scale)), Image.BICUBIC)
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=90)
            out.append(buf.getvalue())
    while len(out) < n:
        import os

        img = Image.frombytes("RGB", (620, 800), os.urandom(620 * 800 * 3)).reduce(2).resize((620, 800))
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def role(url: str, in_flight: int) -> RoleConfig:
    return RoleConfig(endpoints=[EndpointConfig(base_url=url, model="teacher", max_in_flight=in_flight)], timeout_s=60, backoff_s=0.05)


def proc_cpu_s(pid: int) -> float:
    """utime + stime of another process (Linux /proc), to report the server's CPU per request."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _timed(one: Callable[[int], Awaitable[object]], n: int, in_flight: int, latency: float,
                 server_pid: int | None = None) -> dict:
    """One untimed warm-up wave (opens the connections: a one-off ~5 ms each here), then `n` timed calls:
    rate, ratio to ideal, client CPU per request (and the server's, given its pid)."""
    await asyncio.gather(*(one(-1 - i) for i in range(in_flight)))
    s0 = proc_cpu_s(server_pid) if server_pid else 0.0
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ideal = in_flight / latency
    out = {"requests": n, "wall_s": round(wall, 2), "req_per_s": round(n / wall, 1), "ideal": ideal,
           "ratio": round(n / wall / ideal, 3), "cpu_ms_per_req": round(1000 * cpu / n, 3)}
    if server_pid:
        out["server_cpu_ms_per_req"] = round(1000 * (proc_cpu_s(server_pid) - s0) / n, 3)
    return out


async def bench_pool(url: str, n: int, in_flight: int, latency: float, images: list[bytes] | None, server_pid: int) -> dict:
    run_dir = tempfile.mkdtemp(prefix="bench-orch-")
    pool = TeacherPool({"policy": role(url, in_flight)}, RequestCache(run_dir), "bench")
    loader = (lambda ref: images[int(ref.page_id.rsplit("_", 1)[1]) % len(images)]) if images else None

    def msgs(i: int) -> list[Message]:
        refs = [ImageRef(page_id=f"doc_{i % 40}"), ImageRef(page_id=f"doc_{(i + 1) % 40}")] if images else []
        return [Message(role="system", text="You are a careful teacher."), Message(role="user", text=f"question {i}", images=refs)]

    async with pool:
        await pool.check()
        return await _timed(lambda i: pool.chat("policy", msgs(i), image_loader=loader), n, in_flight, latency, server_pid)


async def bench_bare_aiohttp(url: str, n: int, in_flight: int, latency: float, images: list[bytes] | None = None) -> dict:
    """The ceiling on this machine right now: a bare aiohttp loop (no cache, no routing, no retries); with
    `images`, the same two data URIs per request as the pool sends (base64 done once per image, spliced in)."""
    import base64

    import aiohttp

    uris = [b'{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,' + base64.b64encode(j) + b'"}}' for j in images or []]

    def make(i: int) -> bytes:
        if not uris:
            return json.dumps({"model": "teacher", "messages": [{"role": "user", "content": f"question {i}"}]}).encode()
        parts = b",".join([uris[i % len(uris)], uris[(i + 1) % len(uris)], json.dumps({"type": "text", "text": f"question {i}"}).encode()])
        return b'{"model":"teacher","messages":[{"role":"user","content":[' + parts + b"]}]}"

    sem = asyncio.Semaphore(in_flight)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as s:
        async def one(i: int) -> None:
            body = make(i)
            async with sem, s.post(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"}) as r:
                json.loads(await r.read())

        return await _timed(one, n, in_flight, latency)


async def bench_openai_sdk(url: str, n: int, in_flight: int, latency: float) -> dict:
    """The alternative transport: AsyncOpenAI on its aiohttp client (the openai[aiohttp] extra)."""
    from openai import AsyncOpenAI, DefaultAioHttpClient

    sem = asyncio.Semaphore(in_flight)
    async with AsyncOpenAI(base_url=url, api_key="none", max_retries=0, http_client=DefaultAioHttpClient()) as client:
        async def one(i: int) -> None:
            async with sem:
                await client.chat.completions.create(model="teacher", messages=[{"role": "user", "content": f"question {i}"}])

        return await _timed(one, n, in_flight, latency)


async def bench_runner(url: str, episodes: int, in_flight: int, latency: float) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="bench-run-")) / "r"
    pool = TeacherPool({"policy": role(url, in_flight)}, RequestCache(run_dir), "r")
    from tests.support.episode_script import make_episode, make_tasks

    tasks: list[Task] = make_tasks(episodes)
    async with pool:
        await pool.check()
        await asyncio.gather(*(pool.chat("policy", [Message(role="user", text=f"warm {i}")]) for i in range(in_flight)))
        c0, t0 = time.process_time(), time.perf_counter()
        stats = await run_episodes(tasks, 1, make_episode(pool, "r", 2), run_dir, concurrency=in_flight, progress=False, pool=pool)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = stats.requests
    ideal = in_flight / latency
    return {"episodes": stats.finished, "requests": n, "wall_s": round(wall, 2), "req_per_s": round(n / wall, 1), "ideal": ideal,
            "ratio": round(n / wall / ideal, 3), "cpu_ms_per_req": round(1000 * cpu / n, 3), "shards": stats.shards}


def bench_kill9(latency: float) -> dict:
    """kill -9 a run three times mid-way, restart it; count finished requests the server saw again."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-kill-"))
    run_dir, log = tmp / "runs" / "k", tmp / "server.jsonl"
    tasks, samples, turns = 150, 2, 3

    def start(url: str) -> subprocess.Popen[str]:
        args = [sys.executable, "-m", "tests.support.episode_script", "--run-dir", str(run_dir), "--base-url", url, "--tasks", str(tasks),
                "--samples", str(samples), "--turns", str(turns), "--concurrency", "64", "--flush-every", "16"]
        return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def cached() -> set[str]:
        db = sqlite3.connect(run_dir / "requests.sqlite")
        try:
            return {"rq_" + k[:24] for (k,) in db.execute("SELECT key FROM responses")}
        finally:
            db.close()

    def seen() -> list[str]:
        return [json.loads(x)["request_id"] for x in log.read_text().splitlines()] if log.exists() else []

    kills: list[dict] = []
    marks: list[tuple[set[str], int]] = []
    with OpenAIServerProcess(latency_s=latency, log_path=str(log)) as srv:
        for need in (2, 5, 8):  # kill -9 three times at different points
            proc = start(srv.base_url)
            while len(shard_paths(run_dir)) < need:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            marks.append((cached(), len(seen())))
            kills.append({"shards": len(shard_paths(run_dir)), "cached_requests": len(marks[-1][0]), "server_saw": marks[-1][1]})
        proc = start(srv.base_url)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        all_seen = seen()
    reissued = sum(len(before & set(all_seen[mark:])) for before, mark in marks)
    from vrag_data.store.shards import read_table

    t = read_table(str(run_dir / "trajectories"))
    keys = list(zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), strict=True))
    return {"episodes": tasks * samples, "rows": len(keys), "unique": len(set(keys)), "kills": kills,
            "requests_needed": tasks * samples * turns, "requests_issued": len(all_seen), "finished_requests_reissued": reissued}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--in-flight", type=int, default=256)
    ap.add_argument("--requests", type=int, default=2048)
    ap.add_argument("--skip", default="", help="comma list of: plain,bare,sdk,images,bare-images,runner,kill9")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    results: dict[str, dict] = {}
    with OpenAIServerProcess(latency_s=a.latency) as srv:
        if "plain" not in skip:
            results["pool, text only"] = asyncio.run(bench_pool(srv.base_url, a.requests, a.in_flight, a.latency, None, srv.proc.pid))
            print(results["pool, text only"], flush=True)
        if "bare" not in skip:
            results["bare aiohttp loop (reference)"] = asyncio.run(bench_bare_aiohttp(srv.base_url, a.requests, a.in_flight, a.latency))
            print(results["bare aiohttp loop (reference)"], flush=True)
        if "sdk" not in skip:
            results["AsyncOpenAI + DefaultAioHttpClient (reference)"] = asyncio.run(bench_openai_sdk(srv.base_url, a.requests, a.in_flight, a.latency))
            print(results["AsyncOpenAI + DefaultAioHttpClient (reference)"], flush=True)
        if "images" not in skip:
            imgs = page_jpegs(40)
            r = asyncio.run(bench_pool(srv.base_url, a.requests, a.in_flight, a.latency, imgs, srv.proc.pid))
            r["jpeg_kb_per_image"] = round(sum(map(len, imgs)) / len(imgs) / 1024, 1)
            results["pool, 2 page images"] = r
            print(r, flush=True)
        if "bare-images" not in skip:
            imgs = page_jpegs(40)
            r = asyncio.run(bench_bare_aiohttp(srv.base_url, a.requests, a.in_flight, a.latency, imgs))
            results["bare aiohttp loop, same 2 page images (reference)"] = r
            print(r, flush=True)
        if "runner" not in skip:
            results["run_episodes, 2 calls/episode"] = asyncio.run(bench_runner(srv.base_url, a.requests // 2, a.in_flight, a.latency))
            print(results["run_episodes, 2 calls/episode"], flush=True)
    if "kill9" not in skip:
        results["kill -9 x3 + restart"] = bench_kill9(0.2)
        print(results["kill -9 x3 + restart"], flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
