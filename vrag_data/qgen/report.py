"""`vrag-data tasks report`: one static HTML page to judge a batch of generated tasks in a minute.

It shows per-kind counts (hop type, reasoning type, evidence source), the rejection causes of the generation runs
(stage and reason), and a seeded sample of tasks, each with its question, gold answer, documents, hops and the
crops of its evidence boxes (JPEG, embedded, so the file can be mailed). Everything that came from a document or a
model (questions, answers, labels, details) is escaped; nothing is executed or linked.
"""

from __future__ import annotations

import base64
import html
import random
from collections import Counter
from dataclasses import dataclass, field

from vrag_data.errors import VragError
from vrag_data.env.images import encode_jpeg, render_image_ref
from vrag_data.qgen.generate import SHARD, load_rejections
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import EvidenceBox, ImageRef, Task
from vrag_data.store import Workspace, read_records
from vrag_data.store.shards import open_text
from vrag_data.tasks.store import shard_path

CROP_PIXELS = 160_000  # per crop: readable numbers, a small file
MARGIN = 12  # raw px around an evidence box, so a cell is seen with its row and column


@dataclass
class TasksReport:
    path: str
    tasks: int = 0
    sampled: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    by_source: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)  # "stage: reason" -> count
    missing_images: int = 0  # crops whose page image is not in the workspace


def _e(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _counts(title: str, counts: dict[str, int]) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=n>{v}</td></tr>" for k, v in counts.items()) or "<tr><td>none</td></tr>"
    return f"<table><caption>{_e(title)}</caption>{rows}</table>"


def _crop(ws: Workspace, ev: EvidenceBox) -> str | None:
    """An evidence box as a data URI, with a margin (clamped to the page when cut); None when the page image is
    missing."""
    x1, y1, x2, y2 = ev.box.raw
    nx2, ny2 = ev.box.norm[2], ev.box.norm[3]
    # the page size the box was stored against, from its raw and 0-1000 corners
    w, h = (round(x2 * 1000 / nx2) if nx2 else int(x2)), (round(y2 * 1000 / ny2) if ny2 else int(y2))
    grown = Box.from_raw((max(0, x1 - MARGIN), max(0, y1 - MARGIN), min(w, x2 + MARGIN), min(h, y2 + MARGIN)), w, h)
    try:
        img = render_image_ref(ws, ImageRef(page_id=ev.page_id, box=grown), max_pixels=CROP_PIXELS)
    except (OSError, ValueError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(encode_jpeg(img, quality=80)).decode()


def _task_html(ws: Workspace, t: Task, rep: TasksReport) -> str:
    extra = t.extra or {}
    docs = ", ".join(x for x in extra.get("documents", []) if x) or ", ".join(t.doc_stems)
    hops = "".join(f"<li>{_e(h.get('question'))} &rarr; <b>{_e(h.get('answer'))}</b> ({_e(h.get('page_id'))})</li>"
                   for h in extra.get("hops", []))
    crops = []
    for b in t.evidence_boxes:
        uri = _crop(ws, b)
        if uri is None:
            rep.missing_images += 1
            crops.append(f"<div class=miss>{_e(b.page_id)}: page image missing</div>")
        else:
            crops.append(f"<figure><img src=\"{uri}\" alt=\"{_e(b.page_id)}\"><figcaption>{_e(b.page_id)}"
                         f"</figcaption></figure>")
    checks = "; ".join(f"{k}: {v}" for k, v in (extra.get("verify") or {}).items())
    return (f"<section><h3>{_e(t.hop_type)} / {_e(t.reasoning_type)} &middot; {_e(', '.join(t.sources))}</h3>"
            f"<p class=q>{_e(t.question)}</p><p>gold: <b>{_e(t.answer)}</b> ({_e(t.answer_format)})</p>"
            f"<p class=meta>documents: {_e(docs)} &middot; pages: {_e(', '.join(t.evidence_pages))}</p>"
            + (f"<ol class=hops>{hops}</ol>" if hops else "")
            + f"<div class=crops>{''.join(crops)}</div><p class=meta>checks: {_e(checks)}</p>"
            "<p class=judge>right &#9744; &nbsp; flawed &#9744; &nbsp; wrong &#9744;</p></section>")


STYLE = ("body{font:14px sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:0 2em 1em 0;"
         "display:inline-table;vertical-align:top}td{border:1px solid #ccc;padding:2px 8px}td.n{text-align:right}"
         "caption{font-weight:bold;text-align:left}section{border-top:2px solid #888;padding:.5em 0}"
         ".q{font-size:16px}.meta{color:#555}.crops{display:flex;flex-wrap:wrap;gap:8px}"
         "figure{margin:0}img{max-width:520px;border:1px solid #999}.miss{color:#a00}")


def tasks_report(ws: Workspace, out: str | None = None, sample: int = 20, seed: int = 0) -> TasksReport:
    """Write the report of `tasks/generated.parquet` (and the rejections file) to `out`
    (default: `<workspace>/tasks/generated_report.html`)."""
    path = out or f"{ws.tasks}/generated_report.html"
    tasks = sorted(read_records(shard_path(ws, SHARD), Task), key=lambda t: t.task_id)
    if not tasks:
        raise VragError(f"no generated tasks in {ws.tasks}/{SHARD}.parquet; run `vrag-data tasks generate -w {ws.root}` "
                        "first")
    rej = load_rejections(ws)
    rep = TasksReport(path, tasks=len(tasks))
    rep.by_kind = dict(sorted(Counter(t.hop_type for t in tasks).items()))
    rep.by_type = dict(sorted(Counter(t.reasoning_type or "" for t in tasks).items()))
    rep.by_source = dict(sorted(Counter(s for t in tasks for s in t.sources).items()))
    rep.rejected = dict(Counter(f"{r.stage}: {r.reason}" for r in rej).most_common())
    picked = random.Random(f"tasks-report:{seed}").sample(tasks, min(sample, len(tasks)))
    rep.sampled = len(picked)
    body = "".join(_task_html(ws, t, rep) for t in picked)
    page = (f"<!doctype html><html><head><meta charset=utf-8><title>generated tasks</title><style>{STYLE}</style>"
            f"</head><body><h1>Generated tasks: {rep.tasks} stored, {len(rej)} attempts rejected</h1>"
            + _counts("hop type", rep.by_kind) + _counts("reasoning type", rep.by_type)
            + _counts("evidence source", rep.by_source) + _counts("rejections (stage: reason)", rep.rejected)
            + f"<h2>{rep.sampled} sampled tasks (seed {seed})</h2>{body}</body></html>")
    with open_text(path, "w") as f:
        f.write(page)
    return rep
