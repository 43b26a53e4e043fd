"""A small, seeded workspace for the report tests: corpus, tasks, two runs (one with verdicts, one without),
a re-written trajectory in a newer shard, an augmented trajectory, request logs and an export summary.

`build_report_workspace` returns the workspace and the records as written, so the tests compute the
expected numbers from the records themselves (independently of the SQL).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import (
    Action,
    CropRecord,
    Document,
    EvidenceBox,
    ImageRef,
    IngestError,
    LayoutBlock,
    Message,
    Observation,
    Page,
    Provenance,
    RequestLog,
    RunManifest,
    Task,
    Trajectory,
    Turn,
    Usage,
    Verdict,
)
from vrag_data.store import Workspace, write_records
from vrag_data.store.run import RunDir

W, H = 600, 800
XSS = '<script>document.title="pwned"</script><img src=x onerror="document.body.dataset.pwned=1">'
STEMS = ("alpha", "beta", "gamma")
N_PAGES = {"alpha": 4, "beta": 3, "gamma": 2}


@dataclass
class Built:
    ws: Workspace
    documents: list[Document] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)  # the current version of each (run, task, sample)
    verdicts: list[Verdict] = field(default_factory=list)
    requests: list[RequestLog] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    exported: dict[str, int] = field(default_factory=dict)  # recipe -> SFT records in the (newest) export


def _image(path: Path, label: str) -> None:
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.rectangle((60, 100, 540, 400), outline="black", width=4)
    d.text((80, 120), label, fill="black")
    img.save(path, format="JPEG", quality=80)


def is_invalid(u: Turn) -> bool:
    """What the report counts as an invalid turn: a reply the parser refused, or an action the environment refused."""
    return u.action.kind == "invalid" or (u.observation is not None and u.observation.kind == "error")


def _turns(rng: random.Random, task: Task, retrieved: list[str], with_crop: bool, n_invalid: int, answer: str | None) -> tuple[list[Turn], list[CropRecord]]:
    turns: list[Turn] = []
    crops: list[CropRecord] = []
    for pid in retrieved:
        turns.append(Turn(idx=len(turns), assistant=f"<think>look</think><search>{task.question}</search>",
                          action=Action(kind="search", query=task.question),
                          observation=Observation(kind="search", text=f"page {pid} {XSS}", images=[ImageRef(page_id=pid)])))
    for _ in range(n_invalid):
        turns.append(Turn(idx=len(turns), assistant="<serch>oops</serch>", action=Action(kind="invalid", reason="no valid action tag"),
                          observation=Observation(kind="error", text="Your answer has no valid action; use <search> or <answer>.")))
    if with_crop and retrieved and n_invalid == 1:  # a well-formed crop the environment refused (too small): invalid too
        tiny = Box.from_raw((10, 10, 22, 19), W, H)
        turns.append(Turn(idx=len(turns), assistant=f"<bbox>{list(tiny.norm)}</bbox>", action=Action(kind="crop", boxes=[list(map(float, tiny.norm))]),
                          observation=Observation(kind="error", text=f"crop {rng.randint(8, 20)}x9 px is under the minimum of 28 px")))
    if with_crop and retrieved:
        pid = retrieved[-1]
        x1, y1 = rng.randint(0, 400), rng.randint(0, 500)
        box = Box.from_raw((x1, y1, x1 + rng.randint(40, 180), y1 + rng.randint(40, 280)), W, H)
        turns.append(Turn(idx=len(turns), assistant=f"<bbox>{list(box.norm)}</bbox>", action=Action(kind="crop", boxes=[list(map(float, box.norm))]),
                          observation=Observation(kind="crop", images=[ImageRef(page_id=pid, box=box)])))
        crops.append(CropRecord(turn=len(turns) - 1, page_id=pid, box=box))
    if answer is not None:
        turns.append(Turn(idx=len(turns), assistant=f"<answer>{answer}</answer>", action=Action(kind="answer", answer=answer)))
    return turns, crops


def build_report_workspace(root: Path, seed: int = 7) -> Built:
    rng = random.Random(seed)
    ws = Workspace(str(root)).makedirs()
    b = Built(ws)
    for stem in STEMS:
        doc = Document(doc_id=f"sha_{stem}", stem=stem, source_path=f"{stem}.pdf", kind="pdf", n_pages=N_PAGES[stem], n_bytes=1000)
        pages = [Page(page_id=f"{stem}_{p}", doc_id=doc.doc_id, stem=stem, page=p, image=f"pages/{stem}_{p}.jpg", width=W, height=H, dpi=72)
                 for p in range(1, N_PAGES[stem] + 1)]
        blocks = [LayoutBlock(block_id=f"{p.page_id}#0", doc_id=doc.doc_id, page_id=p.page_id, page=p.page, cls="text",
                              bbox=Box.from_raw((60, 100, 540, 400), W, H), source="pymupdf") for p in pages]
        for p in pages:
            _image(root / "pages" / f"{p.page_id}.jpg", p.page_id)
        write_records(ws.path("corpus", "documents", f"{stem}.parquet"), [doc], Document)
        write_records(ws.path("corpus", "pages", f"{stem}.parquet"), pages, Page)
        write_records(ws.path("corpus", "layout", f"{stem}.parquet"), blocks, LayoutBlock)
        b.documents.append(doc)
        b.pages += pages
    b.errors = [IngestError(path="broken.pdf", stage="open", reason="not a PDF: bad header"),
                IngestError(path="scan.pdf", stage="ocr", reason="page 3: OCR failed", page=3)]
    write_records(ws.corpus_table("errors"), b.errors, IngestError)

    benchmarks = ("slidevqa", "mmlongbench", "")
    doc_types = ("Research report", "Guidebook")
    source_sets = (["text"], ["table", "chart"], ["chart", "table"], [])
    for i in range(18):
        stem = STEMS[i % 3]
        srcs = source_sets[i % 4]
        gold = [] if not srcs else sorted({f"{stem}_{rng.randint(1, N_PAGES[stem])}" for _ in range(1 + i % 2)})
        b.tasks.append(Task(
            task_id=f"task{i:02d}", question=f"Question {i} about {stem}? {XSS}", answer=f"ans{i}", doc_ids=[f"sha_{stem}"], doc_stems=[stem],
            evidence_pages=gold, sources=srcs, hop_type="single" if gold else "unanswerable", benchmark=benchmarks[i % 3],
            evidence_boxes=[EvidenceBox(page_id=g, box=Box.from_raw((60, 100, 540, 400), W, H)) for g in gold],
            extra={"doc_type": doc_types[i % 2]} if i % 5 else {},
        ))
    write_records(ws.path("tasks", "part-a.parquet"), b.tasks[:10], Task)
    write_records(ws.path("tasks", "part-b.parquet"), b.tasks[8:], Task)  # overlaps: tasks 8 and 9 twice

    statuses = ("answered", "answered", "answered", "max_turns", "no_answer", "error")
    for run_id, recipe, samples in (("r1", "vrag_rl", 3), ("r2", "visor", 2)):
        trajs = []
        for t in b.tasks:
            for s in range(samples):
                stem = t.doc_stems[0]
                status = rng.choice(statuses)
                retrieved = [f"{stem}_{rng.randint(1, N_PAGES[stem])}" for _ in range(rng.randint(0, 3))]
                turns, crops = _turns(rng, t, retrieved, rng.random() < 0.5, rng.choice((0, 0, 1, 2)), f"ans{rng.randint(0, 30)}" if status == "answered" else None)
                n_inv = sum(1 for u in turns if is_invalid(u))
                trajs.append(Trajectory(
                    traj_id=f"{run_id}-{t.task_id}-{s}", run_id=run_id, task_id=t.task_id, sample=s, recipe=recipe,
                    prompt=[Message(role="user", text=t.question)], turns=turns, retrieved_pages=list(dict.fromkeys(retrieved)) + retrieved[:1],
                    crops=crops, final_answer=turns[-1].action.answer if status == "answered" else None, status=status, n_invalid=n_inv,
                    usage=Usage(requests=len(turns), prompt_tokens=100 * len(turns), completion_tokens=20 * len(turns), cache_hits=rng.randint(0, 1)),
                    latency_s=round(rng.uniform(0.5, 4.0), 3), provenance=Provenance(recipe=recipe, policy="oracle"),
                    # every 7th: a configured fallback used on one or two turns (as a recipe records it)
                    extra={"grounding": [{"used": False, "fallback": "teacher_box", "reason": "no box"}] * (1 + s % 2)}
                    if len(trajs) % 7 == 3 else {},
                ))
        # an older version of the first trajectories (status error) in an earlier shard: the newer shard wins
        stale = [t.model_copy(update={"status": "error", "turns": [], "final_answer": None}) for t in trajs[:5]]
        write_records(ws.path("runs", run_id, "trajectories", "part-000000.parquet"), stale, Trajectory)
        write_records(ws.path("runs", run_id, "trajectories", "part-000001.parquet"), trajs[: len(trajs) // 2], Trajectory)
        write_records(ws.path("runs", run_id, "trajectories", "part-000002.parquet"), trajs[len(trajs) // 2:], Trajectory)
        b.trajectories += trajs
        m = RunManifest(run_id=run_id, recipe=recipe, config={"seed": 0}, config_hash="cfg", code_version="test", workspace=str(root),
                        samples=samples, n_tasks=len(b.tasks), status="finished")
        (root / "runs" / run_id / "manifest.json").write_text(m.model_dump_json())
        reqs = []
        for k in range(40):
            st = rng.choice(("ok", "ok", "ok", "cached", "error"))
            reqs.append(RequestLog(request_id=f"{run_id}-q{k}", run_id=run_id, role=rng.choice(("policy", "judge")), model="m",
                                   endpoint="http://127.0.0.1:1/v1", status=st,
                                   error=rng.choice(("HTTP 429: slow down", "timeout after 30s")) if st == "error" else "",
                                   latency_s=rng.uniform(0.1, 2), retries=rng.randint(0, 2), prompt_tokens=50, completion_tokens=10))
        write_records(ws.path("runs", run_id, "requests", "part-000000000001-000000000040.parquet"), reqs, RequestLog)
        b.requests += reqs

    # r1 has verdicts (correctness for all, structure for some); r2 has none (answered = kept)
    r1 = [t for t in b.trajectories if t.run_id == "r1"]
    for t in r1:
        ok = t.status == "answered" and rng.random() < 0.7
        b.verdicts.append(Verdict(run_id="r1", traj_id=t.traj_id, task_id=t.task_id, filter="correctness", passed=ok,
                                  reason=f"rules score {1.0 if ok else 0.0:.2f}: {t.final_answer!r}", score=1.0 if ok else 0.0))
        if ok:
            good = rng.random() < 0.8
            b.verdicts.append(Verdict(run_id="r1", traj_id=t.traj_id, task_id=t.task_id, filter="structure", passed=good,
                                      reason="2 crop(s) ok" if good else f"gold pages never retrieved: ['{t.task_id}']"))
    RunDir(ws.run("r1")).write_verdicts(b.verdicts)  # as `vrag-data filter` does: with the episodes' fingerprint
    # augmented copies (as `vrag-data filter` writes them: aug-<recipe>.parquet, the source's task and sample, a
    # new traj_id, no verdicts of their own) inherit their source's verdicts and are not de-duplicated away
    src = r1[0]
    augs = [src.model_copy(update={"traj_id": f"r1-aug-{i}", "extra": {"augmentation": f"variant{i}", "source_traj_id": src.traj_id}})
            for i in range(2)]
    write_records(ws.path("runs", "r1", "trajectories", "aug-vrag_rl.parquet"), augs, Trajectory)
    b.trajectories += augs

    b.exported = {"vrag_rl": 11}
    for name, per_recipe, mtime in (("old", {"vrag_rl": 3}, 1000), ("r1", b.exported, 2000)):
        out = root / "exports" / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps({"run_id": "r1", "out_dir": str(out), "formats": ["hf"], "model_family": "qwen2.5-vl",
                                                      "n_trajectories": 55, "n_kept": 11, "counts": {"hf": {"train": 11}},
                                                      "skipped": {}, "warnings": [], "stats": {"per_recipe": per_recipe, "rl_records": 5}}))
        os.utime(out / "summary.json", (mtime, mtime))
    return b
