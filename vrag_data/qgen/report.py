"""`vrag-data tasks report`: one static HTML page to judge a batch of generated tasks in a minute.

It shows per-kind counts (kept / asked per kind: kept tasks and rejected attempts of that kind; reasoning type,
evidence source), the rejection causes of the generation runs (stage and reason) with examples of each, and a
seeded sample of tasks, each with its question, gold answer, documents, hops and its evidence on the page: the
asked cell (the printed value the answer rests on, found in the source PDF's text layer inside the evidence box)
outlined in red and the evidence box in blue (the box in red when no cell is found), with its surroundings (a table cell with its row and the rows around it), at the page
image's own resolution, scaled down only when wider or taller than `CROP_SIDE` (JPEG, embedded, so the file can be
mailed). Everything that came from a document or a
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
from vrag_data.qgen.generate import SHARD
from vrag_data.qgen.run_records import load_rejections
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import EvidenceBox, ImageRef, Task
from vrag_data.store import Workspace, read_records
from vrag_data.store.shards import open_text
from vrag_data.tasks.store import shard_path

CROP_SIDE = 1600  # px: a crop is scaled down only above this (a 10-K table stays readable)
MARGIN = 12  # raw px around an evidence box at least
CONTEXT_ROWS = 4  # box heights shown above and below the box; the crop spans the page's width (row labels)
EXAMPLES = 2  # rejected attempts shown per cause
OUTLINE = (220, 0, 0)  # the asked cell (the printed value the answer rests on), else the whole evidence box
BLOCK = (0, 90, 200)  # the evidence box, when the asked cell was found inside it


@dataclass
class TasksReport:
    path: str
    tasks: int = 0
    sampled: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    by_source: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)  # "stage: reason" -> count
    kept_asked: dict[str, str] = field(default_factory=dict)  # kind -> "kept/asked"
    missing_images: int = 0  # crops whose page image is not in the workspace


def _e(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _counts(title: str, counts: dict[str, int] | dict[str, str]) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=n>{v}</td></tr>" for k, v in counts.items()) or "<tr><td>none</td></tr>"
    return f"<table><caption>{_e(title)}</caption>{rows}</table>"


def _on_row(hits: list, rows: list) -> list:  # noqa: ANN001 - PyMuPDF rects
    """The hits of a value printed on the line of its row label (the one nearest to it when the label is on
    several lines), else every hit: a value printed in other cells too is outlined where it is asked."""
    if not rows or not hits:
        return hits
    def gap(h) -> float:  # noqa: ANN001
        return min(abs((h.y0 + h.y1) / 2 - (r.y0 + r.y1) / 2) + (0 if h.x0 >= r.x0 else 1e4) for r in rows)
    best = min(gap(h) for h in hits)
    return [h for h in hits if gap(h) == best][:1]


def _cells(pdf: str, ev: EvidenceBox, values: list[str], w: int,
           cells: list[tuple[str, str]] = ()) -> list[tuple[float, float, float, float]]:  # type: ignore[assignment]
    """Where the task's printed values (`extra.support`) stand inside its evidence box, in the page image's px,
    read from the source PDF's text layer; [] when the PDF is gone or a value is not printed as text there.
    `cells` = (row label, value) of the asked cells on this page: a value is outlined on its row only."""
    from pathlib import Path

    from vrag_data.ingest.render import import_pymupdf

    page_no = ev.page_id.rsplit("_", 1)[-1]
    if not values or not pdf or not Path(pdf).is_file() or not page_no.isdigit():
        return []
    pymupdf = import_pymupdf(layout=False)
    try:
        with pymupdf.open(pdf) as doc:
            page = doc[int(page_no) - 1]
            k = w / page.rect.width  # px per point
            clip = pymupdf.Rect(*(c / k for c in ev.box.raw))
            rows = {v.strip(): [r for row, val in cells if val.strip() == v.strip() for r in page.search_for(row, clip=clip)]
                    for v in values}
            found = [r for v in values if v.strip() for r in _on_row(page.search_for(v.strip(), clip=clip), rows[v.strip()])]
    except (RuntimeError, ValueError, IndexError):
        return []
    return [(r.x0 * k, r.y0 * k, r.x1 * k, r.y1 * k) for r in found]


def _crop(ws: Workspace, ev: EvidenceBox, pdf: str = "", values: list[str] = (),  # type: ignore[assignment]
          asked: list[tuple[str, str]] = ()) -> str | None:  # type: ignore[assignment]
    """An evidence box outlined on its page's full width, `CONTEXT_ROWS` box heights above and below, at the
    page image's resolution (scaled down only above `CROP_SIDE`), as a data URI; None when the page image is
    missing."""
    from PIL import ImageDraw

    x1, y1, x2, y2 = ev.box.raw
    nx2, ny2 = ev.box.norm[2], ev.box.norm[3]
    # the page size the box was stored against, from its raw and 0-1000 corners
    w, h = (round(x2 * 1000 / nx2) if nx2 else int(x2)), (round(y2 * 1000 / ny2) if ny2 else int(y2))
    pad = max(MARGIN, CONTEXT_ROWS * (y2 - y1))
    ctx = (0, max(0, y1 - pad), w, min(h, y2 + pad))
    try:
        img = render_image_ref(ws, ImageRef(page_id=ev.page_id, box=Box.from_raw(ctx, w, h))).convert("RGB")
    except (OSError, ValueError):
        return None
    sx, sy = img.width / max(1, ctx[2] - ctx[0]), img.height / max(1, ctx[3] - ctx[1])
    draw = ImageDraw.Draw(img)
    cells = _cells(pdf, ev, list(values), w, list(asked))
    for (a, b, c, d), colour, width in [((x1, y1, x2, y2), BLOCK if cells else OUTLINE, 2 if cells else 3),
                                        *((cell, OUTLINE, 3) for cell in cells)]:
        draw.rectangle([(a - ctx[0]) * sx - 3, (b - ctx[1]) * sy - 3, (c - ctx[0]) * sx + 3, (d - ctx[1]) * sy + 3],
                       outline=colour, width=width)
    if max(img.size) > CROP_SIDE:
        k = CROP_SIDE / max(img.size)
        img = img.resize((max(1, round(img.width * k)), max(1, round(img.height * k))))
    return "data:image/jpeg;base64," + base64.b64encode(encode_jpeg(img, quality=85)).decode()


def _examples(rej: list) -> str:  # noqa: ANN001 - Rejection rows
    """Up to `EXAMPLES` rejected attempts per cause: kind, pages, the writer's question and the detail."""
    by_cause: dict[str, list] = {}
    for r in rej:
        by_cause.setdefault(f"{r.stage}: {r.reason}", []).append(r)
    items = []
    for cause, rows in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = "".join(f"<li>{_e(r.kind)} &middot; {_e(', '.join(r.evidence_pages))}: {_e(r.question or '-')} "
                        f"<span class=meta>({_e(r.detail)})</span></li>" for r in rows[:EXAMPLES])
        items.append(f"<li><b>{_e(cause)}</b> ({len(rows)})<ul>{shown}</ul></li>")
    return f"<h2>Rejected attempts, examples per cause</h2><ul class=rej>{''.join(items) or '<li>none</li>'}</ul>"


def _task_html(ws: Workspace, t: Task, rep: TasksReport, sources: dict[str, str]) -> str:
    extra = t.extra or {}
    docs = ", ".join(x for x in extra.get("documents", []) if x) or ", ".join(t.doc_stems)
    hops = "".join(f"<li>{_e(h.get('question'))} &rarr; <b>{_e(h.get('answer'))}</b> ({_e(h.get('page_id'))})</li>"
                   for h in extra.get("hops", []))
    crops = []
    for b in t.evidence_boxes:
        asked = [(str(row), str(val)) for pid, row, val in extra.get("cells", []) if pid == b.page_id]
        uri = _crop(ws, b, sources.get(b.page_id.rsplit("_", 1)[0], ""), [str(v) for v in extra.get("support", [])], asked)
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
         "figure{margin:0}img{max-width:100%;border:1px solid #999}.miss{color:#a00}")


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
    asked = Counter(r.kind for r in rej) + Counter(t.hop_type for t in tasks)
    rep.kept_asked = {k: f"{rep.by_kind.get(k, 0)}/{asked[k]}" for k in sorted(asked)}
    picked = random.Random(f"tasks-report:{seed}").sample(tasks, min(sample, len(tasks)))
    rep.sampled = len(picked)
    from vrag_data.store.corpus import load_documents

    sources = {d.stem: d.source_path for d in load_documents(ws) if d.kind == "pdf"}
    body = "".join(_task_html(ws, t, rep, sources) for t in picked)
    page = (f"<!doctype html><html><head><meta charset=utf-8><title>generated tasks</title><style>{STYLE}</style>"
            f"</head><body><h1>Generated tasks: {rep.tasks} stored, {len(rej)} attempts rejected</h1>"
            + _counts("kind: kept / asked", rep.kept_asked)
            + _counts("reasoning type", rep.by_type)
            + _counts("evidence source", rep.by_source) + _counts("rejections (stage: reason)", rep.rejected)
            + _examples(rej)
            + f"<h2>{rep.sampled} sampled tasks (seed {seed})</h2>{body}</body></html>")
    with open_text(path, "w") as f:
        f.write(page)
    return rep
