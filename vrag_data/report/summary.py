"""The short summary table printed at the end of `synth`, `export` and `report` (rich, on stderr), and one line
per run whose verdicts are out of date (the export refuses those runs; their kept column is empty)."""

from __future__ import annotations

import math
from typing import Any

import duckdb
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vrag_data.store import Workspace
from vrag_data.store.run import stale_hint

_SQL = """
WITH t AS (
  SELECT coalesce(recipe, '(all)') AS recipe, count(*) AS trajectories,
         count(*) FILTER (WHERE status = 'answered') / count(*) AS finish_rate,
         sum(n_invalid_turns) / nullif(sum(n_turns), 0) AS invalid_rate,
         avg(n_turns) AS mean_turns, avg(ndcg) AS mean_ndcg,
         CASE WHEN bool_or(kept IS NOT NULL) THEN count(*) FILTER (WHERE kept) END AS kept,  -- NULL: not filtered yet
         sum(requests) AS requests, sum(prompt_tokens + completion_tokens) AS tokens,
         sum(prompt_tokens + completion_tokens) / nullif(count(*) FILTER (WHERE kept), 0) AS tokens_per_kept
  FROM trajectories GROUP BY GROUPING SETS ((recipe), ())
), e AS (
  SELECT coalesce(recipe, '(all)') AS recipe, sum(records) AS exported
  FROM export_counts WHERE latest GROUP BY GROUPING SETS ((recipe), ())
)
SELECT t.*, e.exported FROM t LEFT JOIN e USING (recipe)
ORDER BY t.recipe = '(all)', t.recipe
"""

COLUMNS = ("recipe", "trajectories", "finish_rate", "invalid_rate", "mean_turns", "mean_ndcg", "kept", "exported",
           "requests", "tokens", "tokens_per_kept")


def summary_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """One row per recipe plus `(all)` (only when there are trajectories), keys = COLUMNS."""
    cur = con.execute(_SQL)
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if len(rows) == 2:  # one recipe: the (all) row repeats it
        rows = rows[:1]
    return [{k: r.get(k) for k in COLUMNS} for r in rows]


def _cell(v: Any, key: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):  # a rate over nothing is no number
        return "–"
    if key.endswith("_rate"):
        return f"{v:.0%}"
    if key in ("requests", "tokens", "tokens_per_kept") and v >= 10_000:
        return f"{v / 1e6:.1f}M" if v >= 1e6 else f"{v / 1e3:.0f}k"
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


PRINTED = tuple(c for c in COLUMNS if c != "tokens")  # fits 80 columns; tokens per kept sample says more
HEADERS = {"recipe": "recipe", "trajectories": "traj", "finish_rate": "fin", "invalid_rate": "inv", "mean_turns": "turns",
           "mean_ndcg": "ndcg", "kept": "kept", "exported": "exp", "requests": "reqs", "tokens": "tokens", "tokens_per_kept": "tok/kept"}


def summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left",
                  caption="fin = answered share, inv = invalid turns share, exp = SFT records exported, tok/kept = all tokens / kept")
    for c in PRINTED:
        table.add_column(HEADERS[c], justify="left" if c == "recipe" else "right", no_wrap=True, min_width=len(HEADERS[c]))
    for r in rows:
        table.add_row(*(_cell(r[c], c) for c in PRINTED))
    return table


def stale_notes(con: duckdb.DuckDBPyConnection, workspace: str) -> list[str]:
    """One line per reported run whose verdicts are stale (`runs.verdict_state`, from `RunDir.verdict_state()`)."""
    rows = con.execute("SELECT run_id, verdict_note FROM runs WHERE verdict_state = 'stale' ORDER BY run_id").fetchall()
    return [stale_hint(run_id, why, workspace) for run_id, why in rows]


def print_summary(con: duckdb.DuckDBPyConnection, title: str, console: Console | None = None,
                  workspace: str = "WORKSPACE") -> list[dict[str, Any]]:
    rows = summary_rows(con)
    out = console or Console(stderr=True)
    if rows:
        out.print(summary_table(rows, title))
    else:
        out.print(f"{title}: no trajectories yet")
    for line in stale_notes(con, workspace):
        out.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return rows


def print_run_summary(ws: Workspace, run_id: str, console: Console | None = None) -> list[dict[str, Any]]:
    """The summary of one run (trajectories, verdicts, the run's newest export), computed in memory from the
    workspace files, for the end of `vrag-data synth` / `export`. Returns the rows it printed."""
    from vrag_data.report.tables import build_tables

    con = duckdb.connect(":memory:")
    try:
        build_tables(con, ws, run_id)
        return print_summary(con, f"run {run_id}", console, ws.root)
    finally:
        con.close()
