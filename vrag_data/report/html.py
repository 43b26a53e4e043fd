"""`report.html`: one static, offline page (inline CSS, inline SVG charts, inline vanilla JS viewer).

Nothing on the page points outside it: no CDN, no fonts, no http(s) links, no relative paths; page images are
embedded thumbnails (`thumbs.py`), so the file alone can be copied or mailed. All text from documents and models
is escaped.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

import duckdb

from vrag_data.report.answers import html_section as answers_section
from vrag_data.report.charts import dense_bins, esc, fmt, hbars, stacked_shares, table, vbars
from vrag_data.report.summary import stale_notes
from vrag_data.report.viewer import VIEWER_JS, embed_json, viewer_data
from vrag_data.store.tempfiles import temp_name
from vrag_data.report.thumbs import Thumbnails, page_thumbnails
from vrag_data.report.views import VIEW_BY_NAME
from vrag_data.store import Workspace

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:32px}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}caption{text-align:left;font-weight:600}
.desc{color:#555;font-size:12px;max-width:900px}.empty,.more{color:#888;font-size:12px}
svg.chart text{font-size:12px;fill:#222}svg.chart text.title{font-weight:600;font-size:13px}svg.chart text.small{font-size:10px}
.grid{display:flex;flex-wrap:wrap;gap:16px}.kpi{border:1px solid #ddd;padding:8px 12px;border-radius:4px}.kpi b{display:block;font-size:20px}
#viewer .filters{display:flex;gap:12px;align-items:center;flex-wrap:wrap}#traj-list{width:100%;font-size:12px}
.turn{border:1px solid #ddd;border-radius:4px;margin:8px 0;padding:6px 10px}.turn.invalid{border-color:#e15759;background:#fff6f6}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font-size:12px}pre.action{color:#1f4e79}pre.obs{color:#555}
.figs{display:flex;flex-wrap:wrap;gap:8px}figure.page{margin:0;width:300px}figure.page svg{width:300px;height:auto;border:1px solid #ccc;background:#fafafa}
figure.page rect.crop{fill:rgba(225,87,89,.15);stroke:#e15759}figure.page rect.stacked{fill:rgba(78,121,167,.15);stroke:#4e79a7}
p.stale{border:1px solid #e15759;background:#fff6f6;padding:6px 10px;border-radius:4px}
figcaption{font-size:11px;color:#555}p.missing{font-size:11px;color:#b00;margin:2px 0}dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:13px}dt{color:#666}dd{margin:0}
"""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql, params or [])
    return [d[0] for d in cur.description], cur.fetchall()


def _view_section(con: duckdb.DuckDBPyConnection, name: str, where: str = "", limit: int = 60) -> str:
    cols = "* EXCLUDE (dimension, value)" if where == ALL else "*"  # constant columns say nothing
    cols, rows = _rows(con, f"SELECT {cols} FROM {name} {where}")
    return f'<h3>{esc(name)}</h3><p class="desc">{esc(VIEW_BY_NAME[name].description)}</p>{table(cols, rows, limit)}'


ALL = "WHERE dimension = 'all'"
CROP_BINS = 20  # crop_size_histogram's bins: [k/20, (k+1)/20) of the page area


def _funnel(con: duckdb.DuckDBPyConnection) -> str:
    _, rows = _rows(con, "SELECT recipe, stage, n FROM stage_funnel")
    by_recipe: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for recipe, stage, n in rows:
        by_recipe[recipe].append((stage, float(n or 0)))
    charts = [hbars(items, f"funnel: {recipe}", width=420, value_fmt=lambda v: fmt(int(v))) for recipe, items in by_recipe.items()]
    return '<div class="grid">' + "".join(charts) + "</div>"


def _actions(con: duckdb.DuckDBPyConnection) -> str:
    _, rows = _rows(con, "SELECT recipe, action_kind, n FROM action_distribution WHERE dimension = 'all'")
    kinds = sorted({k for _, k, _ in rows})
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for recipe, kind, n in rows:
        groups[recipe][kind] = float(n)
    return stacked_shares(list(groups.items()), kinds, "share of turns by action kind")


def _histograms(con: duckdb.DuckDBPyConnection) -> str:
    _, turns = _rows(con, "SELECT n_turns, trajectories FROM turns_histogram WHERE recipe = '(all)' ORDER BY n_turns")
    _, crops = _rows(con, "SELECT bin_start, crops FROM crop_size_histogram WHERE recipe = '(all)' ORDER BY bin_start")
    # every bin between the smallest and the largest, empty ones included, so the x-axis is linear
    turn_bins = range(min(n for n, _ in turns), max(n for n, _ in turns) + 1) if turns else []
    crop_bins = [i / CROP_BINS for i in range(CROP_BINS)] if crops else []
    return ('<div class="grid">'
            + vbars([(str(int(n)), c) for n, c in dense_bins(turns, turn_bins)], "turns per trajectory (all recipes)")
            + vbars([(f"{b:.2f}", c) for b, c in dense_bins(crops, crop_bins)], "crop size, share of page area (all recipes)",
                    color="#e15759")
            + "</div>")


def _stale(con: duckdb.DuckDBPyConnection, ws: Workspace | None) -> str:
    """A warning per run whose verdicts are out of date: their trajectories count, their kept ones do not."""
    notes = stale_notes(con, ws.root if ws is not None else "WORKSPACE")
    return "".join(f'<p class="stale"><b>stale verdicts</b>: {esc(n)}</p>' for n in notes)


def _kpis(con: duckdb.DuckDBPyConnection) -> str:
    (n_docs,), (n_pages,), (n_tasks,) = (con.execute(f"SELECT count(*) FROM {t}").fetchone() for t in ("documents", "pages", "tasks"))
    n_traj, kept, answered, reqs = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE kept), count(*) FILTER (WHERE status = 'answered'), sum(requests) FROM trajectories").fetchone()
    filtered, fallbacks = con.execute("SELECT count(*) FILTER (WHERE kept IS NOT NULL), sum(len(fallbacks)) FROM trajectories").fetchone()
    failed = con.execute("SELECT count(*) FROM requests WHERE is_error").fetchone()[0]
    stale = con.execute("SELECT count(*) FROM runs WHERE verdict_state = 'stale'").fetchone()[0]
    policies = sorted(p or "unknown" for (p,) in con.execute("SELECT DISTINCT policy FROM trajectories").fetchall())
    items: list[tuple[str, Any]] = [("documents", n_docs), ("pages", n_pages), ("tasks", n_tasks), ("trajectories", n_traj),
                                    ("policy", ", ".join(policies) or "-"),
                                    ("finish rate", answered / n_traj if n_traj else None),
                                    ("kept", kept if filtered else "verdicts out of date" if stale else "not filtered yet"),
                                    ("kept rate", kept / filtered if filtered else None), ("requests", reqs or 0),
                                    ("failed requests", failed or 0), ("fallbacks used", fallbacks or 0)]
    note = ""
    if "oracle" in policies:  # the oracle reads the gold: its finish and pass rates say nothing about a model
        note = ('<p class="oracle"><b>oracle policy</b>: trajectories written by the gold-guided offline policy, not by a '
                "model; rates measure the pipeline, not a teacher.</p>")
    return note + '<div class="grid">' + "".join(f'<div class="kpi">{esc(k)}<b>{esc(fmt(v))}</b></div>' for k, v in items) + "</div>"


def _viewer(con: duckdb.DuckDBPyConnection, limit: int, ws: Workspace | None) -> str:
    data = viewer_data(con, limit)
    shots = page_thumbnails(ws, data["pages"]) if ws is not None else Thumbnails(
        missing={p: "report rendered without its workspace" for p in data["pages"]})
    data["thumbs"], data["missing"] = shots.uris, shots.missing
    data["sizes"] = {**{p: list(wh) for p, wh in shots.sizes.items()}, **data["sizes"]}  # the corpus table wins
    return (
        '<section id="viewer"><h2>Trajectory viewer</h2>'
        '<div class="filters"><label>recipe <select id="f-recipe"><option value="">all</option></select></label>'
        '<label>status <select id="f-status"><option value="">all</option></select></label>'
        '<label>verdict <select id="f-verdict"><option value="">all</option></select></label><span id="traj-count"></span></div>'
        '<select id="traj-list" size="8"></select><div id="traj-detail"></div></section>'
        f'<script type="application/json" id="viewer-data">{embed_json(data)}</script>'
        f"<script>{VIEWER_JS}</script>"
    )


def render_html(con: duckdb.DuckDBPyConnection, title: str, runs: list[str], viewer_limit: int = 400,
                ws: Workspace | None = None) -> str:
    by_dim = "WHERE dimension <> 'all' OR recipe = '(all)'"
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1><p class=\"desc\">runs: {esc(', '.join(runs) or 'none')} · built "
        f"{esc(datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))} · every number below is a view in report.duckdb "
        "(<code>vrag-data report --describe</code>)</p>",
        _stale(con, ws), _kpis(con),
        "<h2>Stage funnel</h2>", _funnel(con), _view_section(con, "stage_funnel"),
        "<h2>Actions and turns</h2>", _actions(con), _histograms(con),
        _view_section(con, "finish_rate", ALL),
        _view_section(con, "invalid_actions", ALL), _view_section(con, "invalid_reasons", limit=20),
        _view_section(con, "turns_per_trajectory", ALL),
        _view_section(con, "crop_stats", ALL),
        "<h2>Quality</h2>",
        _view_section(con, "retrieval_quality", ALL),
        _view_section(con, "judge_pass_rate", ALL),
        answers_section(con),
        _view_section(con, "rejection_reasons", limit=40), _view_section(con, "export_gate_stops", limit=40),
        "<h2>Cost</h2>",
        _view_section(con, "cost_per_kept", ALL),
        _view_section(con, "request_stats"), _view_section(con, "request_errors", limit=30),
        _view_section(con, "fallbacks", limit=30),
        "<h2>Breakdowns by benchmark, document type and evidence source</h2>",
        _view_section(con, "finish_rate", by_dim), _view_section(con, "retrieval_quality", by_dim),
        _view_section(con, "cost_per_kept", by_dim),
        "<h2>Ingest</h2>", _view_section(con, "ingest_error_summary", limit=30),
        _viewer(con, viewer_limit, ws),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_html(con: duckdb.DuckDBPyConnection, ws: Workspace, path: str, viewer_limit: int = 400, runs: list[str] | None = None) -> str:
    """Render and write atomically (temporary name, then rename)."""
    text = render_html(con, f"vrag-data report: {ws.root.rsplit('/', 1)[-1]}", runs or [], viewer_limit, ws)
    if ws.is_local:
        target = path.removeprefix("file://")
        tmp = temp_name(os.path.join(os.path.dirname(target) or ".", "report.html"), unique=True)
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, target)
        except BaseException:  # a full disk, an interrupt: no half-written temp file stays
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    else:
        with ws.fs.open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return path
