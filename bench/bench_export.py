"""Benchmark: export N synthetic trajectories with images to all four formats; records/s and peak RSS.

    .venv/bin/python bench/bench_export.py --trajectories 10000 --pages 400 --work /tmp/bench-export

Generates a workspace (page JPEGs, pages, tasks, trajectories with a search, a crop and an answer each,
verdicts), then runs the export in a fresh child process so its peak RSS is the export's alone.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image, ImageDraw  # noqa: E402

from vrag_data.schema.geometry_types import Box  # noqa: E402
from vrag_data.schema.records import (  # noqa: E402
    Action, CropRecord, EvidenceBox, ImageRef, Message, Observation, Page, Provenance, Task, Trajectory, Turn, Verdict,
)
from vrag_data.store import Workspace, write_records  # noqa: E402

W, H = 1240, 1754  # A4 at 150 dpi


def build(root: Path, n_traj: int, n_pages: int, per_shard: int = 1000) -> None:
    rng = random.Random(0)
    ws = Workspace(str(root)).makedirs()
    pages = []
    for i in range(n_pages):
        stem, p = f"doc{i // 20:03d}", i % 20 + 1
        img = Image.new("RGB", (W, H), "white")
        d = ImageDraw.Draw(img)
        for k in range(30):
            y = 80 + k * 55
            d.line((100, y, 100 + rng.randint(300, 1000), y), fill="black", width=12)
        img.save(root / "pages" / f"{stem}_{p}.jpg", quality=85)
        pages.append(Page(page_id=f"{stem}_{p}", doc_id=stem, stem=stem, page=p, image=f"pages/{stem}_{p}.jpg", width=W, height=H, dpi=150))
    write_records(ws.path("corpus", "pages", "all.parquet"), pages, Page)
    tasks, trajs, verdicts = [], [], []
    prov = Provenance(recipe="vrag_rl", policy="oracle", models={"policy": "oracle"}, config_hash="bench")
    n_tasks = max(1, n_traj // 2)
    for t in range(n_tasks):
        pg = pages[rng.randrange(n_pages)]
        norm = (rng.randint(0, 400), rng.randint(0, 400), rng.randint(600, 1000), rng.randint(600, 1000))
        tasks.append(Task(task_id=f"t{t}", question=f"question {t}?", answer=f"answer {t}", doc_ids=[pg.doc_id], doc_stems=[pg.stem],
                          evidence_pages=[pg.page_id], evidence_boxes=[EvidenceBox(page_id=pg.page_id, box=Box.from_norm(norm, W, H), text="x")]))
    write_records(ws.path("tasks", "tasks.parquet"), tasks, Task)
    shard = 0
    for i in range(n_traj):
        task = tasks[i % n_tasks]
        pid = task.evidence_pages[0]
        box = task.evidence_boxes[0].box
        turns = [
            Turn(idx=0, assistant="<think>find it</think><search>q</search>", action=Action(kind="search", query="q"),
                 observation=Observation(kind="search", images=[ImageRef(page_id=pid)])),
            Turn(idx=1, assistant=f"<think>zoom</think><bbox>{list(box.norm)}</bbox>", action=Action(kind="crop", boxes=[list(map(float, box.norm))], page_ids=[pid]),
                 observation=Observation(kind="crop", images=[ImageRef(page_id=pid, box=box)])),
            Turn(idx=2, assistant=f"<answer>{task.answer}</answer>", action=Action(kind="answer", answer=task.answer)),
        ]
        trajs.append(Trajectory(traj_id=f"tr{i}", run_id="bench", task_id=task.task_id, sample=i // n_tasks, recipe="vrag_rl",
                                prompt=[Message(role="system", text="sys"), Message(role="user", text=task.question)], turns=turns,
                                crops=[CropRecord(turn=1, page_id=pid, box=box)], provenance=prov, extra={"coord_space": "qwen3-vl"}))
        verdicts.append(Verdict(run_id="bench", traj_id=f"tr{i}", task_id=task.task_id, filter="correctness", passed=True))
        if len(trajs) == per_shard or i == n_traj - 1:
            write_records(ws.path("runs", "bench", "trajectories", f"part-{shard:05d}.parquet"), trajs, Trajectory)
            write_records(ws.path("runs", "bench", "verdicts", f"part-{shard:05d}.parquet"), verdicts, Verdict)
            trajs, verdicts, shard = [], [], shard + 1
    from vrag_data.store.run import RunDir, fingerprint_of

    rd = RunDir(ws.path("runs", "bench"))  # the verdicts are those of these very trajectories
    newest = rd.newest()
    rd.write_fingerprint(fingerprint_of(newest), len(newest))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def export_child(ws_root: str, out: str, shard_size: int, formats: list[str]) -> None:
    import threading

    from vrag_data.export import export_run
    from vrag_data.recipe import get_recipe

    recipes = [get_recipe("vrag_rl")]  # the bench run has no manifest: its recipe is resolved here, as an entry point does

    # ru_maxrss also counts file-backed pages of memory-mapped Arrow files (reclaimable page cache);
    # sample the anonymous part separately, which is what bounded memory is about.
    peak_anon = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak_anon[0] = max(peak_anon[0], _status_kb("RssAnon"))
            stop.wait(0.05)

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    s = export_run(Workspace(ws_root), "bench", formats=formats, out_dir=out, shard_size=shard_size, recipes=recipes)
    dt = time.perf_counter() - t0
    stop.set()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": dt, "peak_rss_mb": rss_mb, "peak_anon_mb": peak_anon[0] / 1024, "n_kept": s.n_kept, "counts": s.counts,
                      "images_written": s.stats["images"]["written"], "skipped": s.skipped}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=10000)
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--shard-size", type=int, default=1000)
    ap.add_argument("--work", default="/tmp/bench-export")
    ap.add_argument("--formats", default="hf,llamafactory,verl,easyr1")
    ap.add_argument("--reuse", action="store_true", help="keep an existing workspace and images (warm run only)")
    ap.add_argument("--child", nargs=2, metavar=("WS", "OUT"))
    a = ap.parse_args()
    if a.child:
        export_child(a.child[0], a.child[1], a.shard_size, a.formats.split(","))
        return
    work = Path(a.work)
    labels = ["warm (images reused)"]
    if not a.reuse:
        shutil.rmtree(work, ignore_errors=True)
        t0 = time.perf_counter()
        build(work / "ws", a.trajectories, a.pages)
        print(f"workspace built in {time.perf_counter() - t0:.1f}s", flush=True)
        labels.insert(0, "cold (images rendered)")
    for label in labels:
        cmd = [sys.executable, __file__, "--shard-size", str(a.shard_size), "--formats", a.formats, "--child", str(work / "ws"), str(work / "out")]
        r = subprocess.run(cmd,
                           capture_output=True, text=True, check=True)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        n = res["n_kept"]
        total, images = _bytes(work / "out"), _bytes(work / "out" / "images")
        print(f"[{a.formats}] {label}: {n} trajectories in {res['seconds']:.1f}s = {n / res['seconds']:.0f} trajectories/s, "
              f"peak RSS {res['peak_rss_mb']:.0f} MB (anonymous {res['peak_anon_mb']:.0f} MB), images written {res['images_written']}, "
              f"counts {res['counts']}; on disk {total / 1e6:.0f} MB = {total / max(images, 1):.2f} x the distinct image bytes "
              f"({images / 1e6:.0f} MB)", flush=True)


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


if __name__ == "__main__":
    main()
