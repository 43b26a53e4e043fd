"""Report benchmark: `vrag-data report` over a workspace with 1M synthetic trajectory rows.

    .venv/bin/python bench/bench_report.py [--rows 1000000] [--threads 2] [--shard-rows 100000] [--keep DIR] [--compact]

`--shard-rows 64` writes shards the size a synth run writes (~15.6k trajectory shards for 1M rows).

The generator writes record-shaped parquet shards directly with pyarrow (the same columns and JSON
encoding `write_records` produces, checked against `arrow_schema`), drawing turns from a pool of
pre-serialised variants so generation stays fast. Timed: the full build (tables + views + HTML, in one
process) and every view (`SELECT *`, fetched), each on a fresh read-only connection.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from vrag_data.report import VIEWS, build_report
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import (
    Action,
    CropRecord,
    ImageRef,
    Observation,
    Page,
    Provenance,
    RequestLog,
    Task,
    Trajectory,
    Turn,
    Usage,
    Verdict,
)
from vrag_data.store import Workspace, write_records
from vrag_data.store.shards import arrow_schema

W, H = 1240, 1754
RECIPES = ("vrag_rl", "visor", "unidoc_rl", "evisrag", "mmdoc_r1")
STATUSES = ("answered",) * 6 + ("max_turns", "no_answer", "error")


def _write(path: Path, cols: dict, model) -> None:
    schema = arrow_schema(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({n: cols[n] for n in schema.names}, schema=schema), path, compression="zstd")


def _turn_pool(rng: random.Random, n_pages: int, stems: list[str]) -> list[tuple[str, str, str | None]]:
    """(turn JSON, action kind, crop JSON or None) variants; idx is patched in as a prefix-free field order."""
    pool = []
    for _ in range(400):
        stem = rng.choice(stems)
        pid = f"{stem}_{rng.randint(1, n_pages)}"
        kind = rng.choice(("search", "search", "crop", "think", "invalid", "select"))
        if kind == "crop":
            x, y = rng.randint(0, 900), rng.randint(0, 1300)
            box = Box.from_raw((x, y, x + rng.randint(50, 300), y + rng.randint(50, 400)), W, H)
            t = Turn(idx=0, assistant=f"<think>zoom</think><bbox>{list(box.norm)}</bbox>", action=Action(kind="crop", boxes=[list(map(float, box.norm))]),
                     observation=Observation(kind="crop", images=[ImageRef(page_id=pid, box=box)]))
            crop = CropRecord(turn=0, page_id=pid, box=box).model_dump(mode="json")
        elif kind == "search":
            t = Turn(idx=0, assistant="<think>need the table</think><search>revenue 2023</search>", action=Action(kind="search", query="revenue 2023"),
                     observation=Observation(kind="search", text="", images=[ImageRef(page_id=pid)]))
            crop = None
        elif kind == "invalid":
            t = Turn(idx=0, assistant="<serch>x</serch>", action=Action(kind="invalid", reason="no valid action tag"),
                     observation=Observation(kind="error", text="use <search> or <answer>"))
            crop = None
        else:
            t = Turn(idx=0, assistant=f"<think>hmm</think><{kind}>1</{kind}>", action=Action(kind=kind, indices=[1] if kind == "select" else []))
            crop = None
        d = t.model_dump(mode="json")
        pool.append((d, kind, crop))
    return pool


def generate(root: Path, rows: int, seed: int = 0, shard: int = 100_000) -> Workspace:
    rng = random.Random(seed)
    ws = Workspace(str(root)).makedirs()
    n_docs, n_pages = 500, 20
    stems = [f"doc{i:04d}" for i in range(n_docs)]
    pages = [Page(page_id=f"{s}_{p}", doc_id=f"sha_{s}", stem=s, page=p, image=f"pages/{s}_{p}.jpg", width=W, height=H, dpi=144)
             for s in stems for p in range(1, n_pages + 1)]
    write_records(str(ws.path("corpus", "pages", "all.parquet")), pages, Page)
    n_tasks = max(1, rows // 8)
    tasks = []
    for i in range(n_tasks):
        s = rng.choice(stems)
        gold = sorted({f"{s}_{rng.randint(1, n_pages)}" for _ in range(rng.randint(0, 2))})
        tasks.append(Task(task_id=f"t{i:07d}", question=f"q{i}", answer=f"a{i}", doc_ids=[f"sha_{s}"], doc_stems=[s], evidence_pages=gold,
                          sources=rng.choice((["text"], ["table"], ["chart"], ["table", "text"])), benchmark=rng.choice(("slidevqa", "mmlongbench", "vidoseek")),
                          extra={"doc_type": rng.choice(("report", "slides", "manual"))}))
    write_records(str(ws.path("tasks", "all.parquet")), tasks, Task)
    pool = _turn_pool(rng, n_pages, stems)
    answer = Turn(idx=0, assistant="<answer>42</answer>", action=Action(kind="answer", answer="42")).model_dump(mode="json")
    prov = {r: json.dumps(Provenance(recipe=r, policy="model", models={"policy": "m"}).model_dump(mode="json")) for r in RECIPES}
    prompt = json.dumps([{"role": "user", "text": "question", "images": []}])
    schema_names = arrow_schema(Trajectory).names
    verdicts: dict[str, list] = {k: [] for k in arrow_schema(Verdict).names}
    done = 0
    part = 0
    while done < rows:
        n = min(shard, rows - done)
        cols: dict[str, list] = {k: [] for k in schema_names}
        v_cols: dict[str, list] = {k: [] for k in arrow_schema(Verdict).names}
        for j in range(n):
            k = done + j
            task = tasks[k % n_tasks]
            recipe = RECIPES[k % len(RECIPES)]
            status = rng.choice(STATUSES)
            turns, crops, retrieved, n_inv = [], [], [], 0
            for idx in range(rng.randint(1, 6)):
                d, kind, crop = rng.choice(pool)
                d = dict(d, idx=idx)
                turns.append(d)
                if kind == "search":
                    retrieved.append(d["observation"]["images"][0]["page_id"])
                if crop is not None:
                    crops.append(dict(crop, turn=idx))
                n_inv += kind == "invalid"
            if status == "answered":
                turns.append(dict(answer, idx=len(turns)))
            traj = f"x{k:08d}"
            row = {
                "traj_id": traj, "run_id": "bench", "task_id": task.task_id, "sample": k // n_tasks, "recipe": recipe, "prompt": prompt,
                "turns": json.dumps(turns), "retrieved_pages": json.dumps(list(dict.fromkeys(retrieved))), "selected_pages": "[]",
                "crops": json.dumps(crops), "evidence_space": "[]", "final_answer": "42" if status == "answered" else None, "status": status,
                "reason": "", "n_invalid": n_inv,
                "usage": json.dumps(Usage(requests=len(turns), prompt_tokens=900 * len(turns), completion_tokens=80 * len(turns)).model_dump()),
                "latency_s": rng.uniform(1, 30), "provenance": prov[recipe], "extra": "{}", "started_at": None, "finished_at": None,
            }
            for c in schema_names:
                cols[c].append(row[c])
            ok = status == "answered" and rng.random() < 0.6
            for c, v in (("run_id", "bench"), ("traj_id", traj), ("task_id", task.task_id), ("filter", "correctness"), ("passed", ok),
                         ("reason", f"rules score {float(ok):.2f}"), ("score", float(ok))):
                v_cols[c].append(v)
        _write(Path(ws.run("bench")) / "trajectories" / f"part-{part:06d}.parquet", cols, Trajectory)
        for c, vals in v_cols.items():
            verdicts[c].extend(vals)
        done += n
        part += 1
    # `vrag-data filter` writes a run's verdicts as one file, whatever the number of trajectory shards
    _write(Path(ws.run("bench")) / "verdicts" / "filters.parquet", verdicts, Verdict)
    reqs = [RequestLog(request_id=f"r{i}", run_id="bench", role=rng.choice(("policy", "judge")), model="m", endpoint="http://127.0.0.1:8000/v1",
                       status=rng.choice(("ok",) * 8 + ("cached", "error")), error="", latency_s=rng.uniform(0.2, 9), retries=rng.randint(0, 2),
                       prompt_tokens=900, completion_tokens=80) for i in range(200_000)]
    write_records(str(Path(ws.run("bench")) / "requests" / "part-1.parquet"), reqs, RequestLog)
    return ws


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shard-rows", type=int, default=100_000, help="trajectories per shard (verdicts: one file, as filter writes)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated workspace here")
    ap.add_argument("--compact", action="store_true", help="compact the run's shards first (what synth and filter do)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        t = time.perf_counter()
        if (root / "ws" / "runs" / "bench" / "requests").is_dir():  # --keep DIR from an earlier run: reuse it
            ws = Workspace(str(root / "ws"))
        else:
            ws = generate(root / "ws", args.rows, shard=args.shard_rows)
        gen = time.perf_counter() - t
        if args.compact:
            from vrag_data.store.run import RunDir

            t = time.perf_counter()
            c = RunDir(ws.run("bench")).compact()
            print(f"compaction: {c.shards} shards -> 1 ({c.rows:,} rows) in {time.perf_counter() - t:.1f}s")
        cpu = time.process_time()
        res = build_report(ws, threads=args.threads)
        cpu = time.process_time() - cpu
        print(f"rows={args.rows:,} generate={gen:.1f}s build={res.seconds:.1f}s wall, {cpu:.1f}s CPU (all threads) "
              f"load={os.getloadavg()[0]:.1f} db={os.path.getsize(ws.report_db) / 1e6:.0f} MB "
              f"html={os.path.getsize(ws.report_html) / 1e6:.1f} MB counts={res.counts}")
        print("| build step | wall s | CPU s |\n|---|---|---|")
        for k, (w, c) in res.timings.items():
            print(f"| {k} | {w:.2f} | {c:.2f} |")
        print("| view | rows | wall s | CPU s |\n|---|---|---|---|")
        worst = 0.0
        for v in VIEWS:
            con = duckdb.connect(ws.report_db, read_only=True, config={"threads": args.threads})
            t, c = time.perf_counter(), time.process_time()
            n = len(con.execute(f"SELECT * FROM {v.name}").fetchall())
            dt, dc = time.perf_counter() - t, time.process_time() - c
            con.close()
            worst = max(worst, dt)
            print(f"| {v.name} | {n} | {dt:.3f} | {dc:.3f} |")
        print(f"slowest view: {worst:.3f}s")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
