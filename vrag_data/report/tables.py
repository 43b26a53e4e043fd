"""The report's tables: workspace shards loaded into DuckDB, nested JSON unpacked, per-trajectory facts
(dimensions, kept flag, retrieval metrics) computed once so every view is a cheap aggregate.

Tables: documents, pages, layout_blocks, ingest_errors, tasks, runs, trajectories, turns, crops, requests,
verdicts, exports, export_counts. A missing input gives an empty table, never an error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from vrag_data.report.sources import export_summaries, load_raw, manifests, run_dirs
from vrag_data.store import Workspace
from vrag_data.store.run import RunDir, is_episode_shard_sql, newest_shard_sql

# A verdict is a judgement of the answer when the filter that wrote it says so (`Verdict.judges_answer`, from the
# filter's `judges_answers`, stamped by the chain); a verdict that does not say (NULL: written before the flag, or
# not by a chain) counts when its filter is the built-in answer judge.
LEGACY_JUDGE_FILTER = "correctness"

# A reason without its variable details ("gold pages never retrieved: [..]" -> "gold pages never retrieved",
# "bucket 3 over cap 10" -> "bucket # over cap #"), so rejection and error tables group like with like.
# A reason without its ids, quotes, parentheticals and numbers, so the same cause groups into one row:
# "near-duplicate of task t_3fa9c2 (jaccard 0.91)" -> "near-duplicate of task <id>".
_REASON_CODE = ("left(trim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace("
                "split_part(coalesce({col}, ''), ':', 1), '\\([^)]*\\)', '', 'g'), "
                "'\\b(t|tr|rq|sha|doc)_[0-9a-fA-F]+\\b', '<id>', 'g'), "
                "'''[^'']*''|\"[^\"]*\"', '<text>', 'g'), "
                "'[0-9]+(\\.[0-9]+)?', '#', 'g'), '\\s+', ' ', 'g')), 80)")


def reason_code(col: str) -> str:
    return _REASON_CODE.format(col=col)


# Turns are parsed once into typed structs (a second JSON pass per field would double the cost at 1M rows);
# observation images stay JSON (ImageRef: page_id, box, stacked) for the viewer.
_ACTION_TYPE = ('{"kind":"VARCHAR","thought":"VARCHAR","query":"VARCHAR","keywords":"VARCHAR[]","indices":"BIGINT[]",'
                '"boxes":"DOUBLE[][]","page_ids":"VARCHAR[]","answer":"VARCHAR","evidence":"VARCHAR[]","reason":"VARCHAR"}')
_TURN_TYPE = ('[{"idx":"BIGINT","assistant":"VARCHAR","action":' + _ACTION_TYPE + ',"observation":{"kind":"VARCHAR","text":"VARCHAR",'
              '"images":"JSON[]"},"role":"VARCHAR","request_ids":"VARCHAR[]","latency_s":"DOUBLE"}]')
_CROP_TYPE = '[{"turn":"BIGINT","page_id":"VARCHAR","box":{"raw":"DOUBLE[]","norm":"DOUBLE[]"}}]'
_USAGE_TYPE = '{"requests":"BIGINT","prompt_tokens":"BIGINT","completion_tokens":"BIGINT","cache_hits":"BIGINT","retries":"BIGINT"}'
_BOX_TYPE = '{"raw":"DOUBLE[]","norm":"DOUBLE[]"}'

_SQL_CORPUS = f"""
CREATE OR REPLACE TABLE documents AS
SELECT * EXCLUDE (filename), json_array_length(toc) AS n_toc, json_array_length(figures) AS n_figures FROM raw_documents;

CREATE OR REPLACE TABLE pages AS SELECT * EXCLUDE (filename) FROM raw_pages;

CREATE OR REPLACE TABLE layout_blocks AS
SELECT * EXCLUDE (filename, bbox), b.raw[1] AS x1, b.raw[2] AS y1, b.raw[3] AS x2, b.raw[4] AS y2,
       (b.norm[3] - b.norm[1]) * (b.norm[4] - b.norm[2]) / 1e6 AS area_frac, bbox
FROM (SELECT *, from_json(bbox, '{_BOX_TYPE}') AS b FROM raw_layout);

CREATE OR REPLACE TABLE ingest_errors AS
SELECT path, stage, page, reason, {reason_code('reason')} AS reason_code, "at",
       CASE WHEN filename LIKE '%import_errors.parquet' THEN 'tasks' ELSE 'corpus' END AS origin
FROM raw_ingest_errors;

CREATE OR REPLACE TABLE tasks AS
SELECT * EXCLUDE (filename, _rn, evidence_pages, sources),
       from_json(evidence_pages, '["VARCHAR"]') AS evidence_pages,
       from_json(sources, '["VARCHAR"]') AS sources,
       coalesce(nullif(benchmark, ''), 'unknown') AS benchmark_name,
       coalesce(nullif(json_extract_string(extra, '$.doc_type'), ''), 'unknown') AS doc_type,
       coalesce(nullif(array_to_string(list_sort(list_distinct(from_json(sources, '["VARCHAR"]'))), '+'), ''), 'none') AS evidence_source,
       json_array_length(evidence_pages) AS n_evidence_pages
FROM (SELECT *, row_number() OVER (PARTITION BY task_id ORDER BY filename) AS _rn FROM raw_tasks)
WHERE _rn = 1;
"""

# Episode shards: the newest shard wins for a (run, task, sample), by `RunDir`'s own rule (`newest_shard_sql`
# is `RunDir.newest()` in SQL); a semi-join on the newest shard per key avoids sorting the wide rows. The other
# trajectory files (`RunDir.augmented_files()`, written by `vrag-data filter`) hold augmented copies that share
# their source's (task, sample) under a new traj_id: every row of them counts, as in the exporter. The shards are scanned twice, not four times (a run writes thousands of small shards, and each
# scan pays per file): once for every column but the wide turns (traj_raw, in memory), once for the turns.
_SQL_RUNS = f"""
CREATE OR REPLACE TEMP TABLE traj_raw AS
SELECT * EXCLUDE (prompt, turns, evidence_space) FROM raw_trajectories;

CREATE OR REPLACE TEMP TABLE traj_latest AS
{newest_shard_sql("traj_raw")};

CREATE OR REPLACE TEMP TABLE traj_base AS
SELECT t.traj_id, t.run_id, t.task_id, t.sample, t.recipe, t.retrieved_pages, t.selected_pages,
       t.final_answer, t.status, t.reason, t.n_invalid, t.usage, t.latency_s, t.provenance, t.extra, t.started_at,
       t.finished_at, t.filename, coalesce(k.benchmark_name, 'unknown') AS benchmark, coalesce(k.doc_type, 'unknown') AS doc_type,
       coalesce(k.evidence_source, 'none') AS evidence_source, k.evidence_pages AS gold_pages, t.crops
FROM traj_raw t
LEFT JOIN traj_latest l ON l.run_id = t.run_id AND l.task_id = t.task_id AND l.sample = t.sample
LEFT JOIN tasks k ON k.task_id = t.task_id
WHERE l.filename = t.filename OR NOT {is_episode_shard_sql("t.filename")};

CREATE OR REPLACE TABLE verdicts AS
SELECT v.* EXCLUDE (filename), {reason_code('v.reason')} AS reason_code, coalesce(v.judges_answer, v.filter = '{LEGACY_JUDGE_FILTER}') AS is_judge,
       b.recipe, v.filename AS verdict_file
FROM raw_verdicts v LEFT JOIN (SELECT run_id, traj_id, any_value(recipe) AS recipe FROM traj_base GROUP BY ALL) b USING (run_id, traj_id);

CREATE OR REPLACE TABLE turns AS
SELECT traj_id, run_id, recipe, benchmark, doc_type, evidence_source, u.idx, u.role, u.assistant,
       u.action.kind AS action_kind, u.action AS action,
       -- invalid: the parser refused the reply, or the environment refused a well-formed action (a crop under the
       -- minimum size, an unknown page): the trajectory's n_invalid counts both, so the turn rate does too
       u.action.kind = 'invalid' OR coalesce(u.observation.kind, '') = 'error' AS is_invalid,
       CASE WHEN u.action.kind = 'invalid' THEN nullif(u.action.reason, '')
            WHEN u.observation.kind = 'error' THEN 'refused ' || u.action.kind || ': ' || left(u.observation.text, 200) END
         AS invalid_reason,
       u.observation.kind AS observation_kind, u.observation.text AS observation_text,
       coalesce(len(u.observation.images), 0) AS n_images, u.observation.images AS observation_images,
       coalesce(len(u.request_ids), 0) AS n_requests, u.latency_s
FROM (SELECT b.traj_id, b.run_id, b.recipe, b.benchmark, b.doc_type, b.evidence_source,
             unnest(from_json(r.turns, '{_TURN_TYPE}')) AS u
      FROM raw_trajectories r JOIN traj_base b USING (run_id, traj_id, filename));

CREATE OR REPLACE TABLE crops AS
SELECT traj_id, run_id, recipe, benchmark, doc_type, evidence_source, c.turn, c.page_id,
       c.box.raw[1] AS x1, c.box.raw[2] AS y1, c.box.raw[3] AS x2, c.box.raw[4] AS y2,
       c.box.norm[1] AS nx1, c.box.norm[2] AS ny1, c.box.norm[3] AS nx2, c.box.norm[4] AS ny2,
       greatest(c.box.norm[3] - c.box.norm[1], 0) * greatest(c.box.norm[4] - c.box.norm[2], 0) / 1e6 AS area_frac
FROM (SELECT traj_id, run_id, recipe, benchmark, doc_type, evidence_source, unnest(from_json(crops, '{_CROP_TYPE}')) AS c
      FROM traj_base);

CREATE OR REPLACE TABLE requests AS
SELECT * EXCLUDE (filename), status = 'cached' AS cache_hit, status = 'error' AS is_error,
       CASE WHEN status = 'error' THEN {reason_code('error')} END AS error_code
FROM raw_requests;
"""

# Kept = what the filter kept (vrag_data.store.run.Verdicts.keep), counted only where the exporter would export:
# NULL for a run never filtered ("not filtered yet" is not "kept") and for a run whose verdicts are stale
# (`runs.verdict_state`, `RunDir.verdict_state()`: the export refuses them, so the report counts none of them);
# otherwise every verdict of the trajectory passed, and an augmented trajectory without verdicts inherits its
# source's. A stale run's verdict column reads 'stale'. NDCG and completeness follow vrag_data.rewards.retrieval (binary
# relevance over the de-duplicated retrieval order); both are NULL when the task has no gold page.
_SQL_TRAJ = f"""
CREATE OR REPLACE TEMP TABLE traj_verdicts AS
SELECT run_id, traj_id, bool_and(passed) AS all_passed, count(*) AS n_verdicts,
       string_agg(filter, ',' ORDER BY filter) FILTER (WHERE NOT passed) AS failed_filters,
       bool_and(passed) FILTER (WHERE is_judge) AS judge_passed, avg(score) FILTER (WHERE is_judge) AS judge_score
FROM verdicts GROUP BY run_id, traj_id;

CREATE OR REPLACE TEMP TABLE traj_turn_stats AS
SELECT traj_id, run_id, count(*) AS n_turns,
       count(*) FILTER (WHERE action_kind = 'search') AS n_search,
       count(*) FILTER (WHERE action_kind = 'crop') AS n_crop_actions,
       count(*) FILTER (WHERE is_invalid) AS n_invalid_turns
FROM turns GROUP BY traj_id, run_id;

CREATE OR REPLACE TEMP TABLE traj_crop_stats AS
SELECT traj_id, run_id, count(*) AS n_crops, sum(area_frac) AS crop_area_sum FROM crops GROUP BY traj_id, run_id;

CREATE OR REPLACE TABLE trajectories AS
WITH b AS (
  SELECT *, from_json(retrieved_pages, '["VARCHAR"]') AS ret, list_distinct(gold_pages) AS gold,
         from_json(usage, '{_USAGE_TYPE}') AS us,
         json_extract_string(extra, ['$.augmentation', '$.source_traj_id', '$.parent_traj_id']) AS ex
  FROM traj_base
), m AS (
  SELECT *, list_filter(ret, lambda x, i: list_position(ret, x) = i) AS ret_dedup FROM b
), aug AS (  -- few rows: joining the verdicts for these alone keeps two 1M-row hash joins off the main query
  SELECT a.run_id, a.traj_id, coalesce(s1.all_passed, s2.all_passed) AS inherited
  FROM (SELECT run_id, traj_id, ex FROM b WHERE coalesce(ex[1], '') <> '') a
  LEFT JOIN traj_verdicts s1 ON s1.traj_id = a.ex[2] AND s1.run_id = a.run_id
  LEFT JOIN traj_verdicts s2 ON s2.traj_id = a.ex[3] AND s2.run_id = a.run_id
)
SELECT m.traj_id, m.run_id, m.task_id, m.sample, m.recipe, m.benchmark, m.doc_type, m.evidence_source,
       json_extract_string(m.provenance, '$.policy') AS policy,
       -- configured fallbacks a recipe used (each recorded in extra as an object with a "fallback" key): one entry per use
       CASE WHEN contains(m.extra, '"fallback"') THEN regexp_extract_all(m.extra, '"fallback":\\s*"([^"]+)"', 1)
            ELSE []::VARCHAR[] END AS fallbacks,
       m.status, m.reason, m.final_answer, m.n_invalid,
       coalesce(ts.n_turns, 0) AS n_turns, coalesce(ts.n_search, 0) AS n_search,
       coalesce(ts.n_crop_actions, 0) AS n_crop_actions, coalesce(ts.n_invalid_turns, 0) AS n_invalid_turns,
       coalesce(cs.n_crops, 0) AS n_crops, coalesce(cs.crop_area_sum, 0) AS crop_area_sum,
       coalesce(m.us.requests, 0) AS requests, coalesce(m.us.prompt_tokens, 0) AS prompt_tokens,
       coalesce(m.us.completion_tokens, 0) AS completion_tokens, coalesce(m.us.cache_hits, 0) AS cache_hits,
       coalesce(m.us.retries, 0) AS retries,
       m.latency_s,
       m.ret_dedup AS retrieved_pages, from_json(m.selected_pages, '["VARCHAR"]') AS selected_pages, m.gold AS gold_pages,
       CASE WHEN coalesce(len(m.gold), 0) = 0 THEN NULL
            ELSE len(list_filter(m.gold, lambda g: list_contains(m.ret_dedup, g))) = len(m.gold) END AS retrieval_complete,
       CASE WHEN coalesce(len(m.gold), 0) = 0 THEN NULL
            ELSE least(1.0, coalesce(list_sum(list_transform(m.ret_dedup, lambda x, i: CASE WHEN list_contains(m.gold, x) THEN 1.0 / log2(i + 1) ELSE 0.0 END)), 0.0)
                 / list_sum(list_transform(range(1, len(m.gold) + 1), lambda i: 1.0 / log2(i + 1)))) END AS ndcg,
       coalesce(v.n_verdicts, 0) AS n_verdicts, v.failed_filters, v.judge_passed, v.judge_score,
       CASE WHEN rs.verdict_state = 'fresh' THEN coalesce(v.all_passed, g.inherited, false)
            END AS kept,  -- NULL: not filtered yet, or verdicts out of date: unknown, not "kept"
       CASE WHEN rs.verdict_state = 'stale' THEN 'stale'
            WHEN coalesce(v.all_passed, g.inherited) IS NULL THEN 'none'
            WHEN coalesce(v.all_passed, g.inherited) THEN 'pass' ELSE 'fail' END AS verdict,
       nullif(m.ex[1], '') AS augmentation,
       m.started_at, m.finished_at, m.filename AS shard
FROM m
LEFT JOIN traj_turn_stats ts ON ts.traj_id = m.traj_id AND ts.run_id = m.run_id
LEFT JOIN traj_crop_stats cs ON cs.traj_id = m.traj_id AND cs.run_id = m.run_id
LEFT JOIN traj_verdicts v ON v.traj_id = m.traj_id AND v.run_id = m.run_id
LEFT JOIN aug g ON g.traj_id = m.traj_id AND g.run_id = m.run_id
LEFT JOIN runs rs ON rs.run_id = m.run_id;
"""

_RUNS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("recipe", pa.string()), ("status", pa.string()), ("samples", pa.int64()),
    ("n_tasks", pa.int64()), ("config_hash", pa.string()), ("code_version", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")), ("finished_at", pa.timestamp("us", tz="UTC")),
    ("stats", pa.string()), ("config", pa.string()), ("verdict_state", pa.string()), ("verdict_note", pa.string()),
])
_EXPORTS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("out_dir", pa.string()), ("formats", pa.string()), ("model_family", pa.string()),
    ("n_trajectories", pa.int64()), ("n_kept", pa.int64()), ("n_sft_records", pa.int64()), ("n_rl_records", pa.int64()),
    ("n_skipped", pa.int64()), ("counts", pa.string()), ("skipped", pa.string()), ("warnings", pa.string()),
    ("summary_path", pa.string()), ("mtime", pa.float64()), ("latest", pa.bool_()), ("unfiltered", pa.bool_()),
])
_EXPORT_COUNTS_SCHEMA = pa.schema([("run_id", pa.string()), ("out_dir", pa.string()), ("recipe", pa.string()),
                                   ("records", pa.int64()), ("latest", pa.bool_())])
# records the export gate stopped, per run, recipe and "<kind>:<reason code>" (`vrag_data.export.gate`)
_EXPORT_GATE_SCHEMA = pa.schema([("run_id", pa.string()), ("out_dir", pa.string()), ("recipe", pa.string()),
                                 ("reason_code", pa.string()), ("records", pa.int64()), ("latest", pa.bool_())])


def _create_from_rows(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict], schema: pa.Schema) -> None:
    table = pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()
    con.register(f"_rows_{name}", table)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _rows_{name}")
    con.unregister(f"_rows_{name}")


def _int(x: object) -> int:
    try:
        return int(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def _exports(con: duckdb.DuckDBPyConnection, summaries: list[dict]) -> None:
    """One row per export summary; `latest` marks the newest export of each run (the funnel counts it)."""
    newest: dict[str, float] = {}
    for s in summaries:
        newest[s["run_id"]] = max(newest.get(s["run_id"], -1.0), s["mtime"])
    rows, counts, gated = [], [], []
    for s in summaries:
        stats = s.get("stats") or {}
        per_recipe = stats.get("per_recipe") or {}
        latest = s["mtime"] == newest[s["run_id"]]
        rows.append({
            "run_id": s["run_id"], "out_dir": s.get("out_dir", ""), "formats": json.dumps(s.get("formats", [])),
            "model_family": s.get("model_family"), "n_trajectories": _int(s.get("n_trajectories")), "n_kept": _int(s.get("n_kept")),
            "n_sft_records": sum(_int(v) for v in per_recipe.values()), "n_rl_records": _int(stats.get("rl_records")),
            "n_skipped": sum(_int(v) for v in (s.get("skipped") or {}).values()), "counts": json.dumps(s.get("counts", {})),
            "skipped": json.dumps(s.get("skipped", {})), "warnings": json.dumps(s.get("warnings", [])),
            "summary_path": s["summary_path"], "mtime": s["mtime"], "latest": latest,
            "unfiltered": bool((s.get("provenance") or {}).get("unfiltered")),
        })
        gated += [{"run_id": s["run_id"], "out_dir": s.get("out_dir", ""), "recipe": r, "reason_code": code,
                   "records": _int(n), "latest": latest}
                  for r, codes in (stats.get("gate") or {}).items() for code, n in (codes or {}).items()]
        counts += [{"run_id": s["run_id"], "out_dir": s.get("out_dir", ""), "recipe": r, "records": _int(n), "latest": latest}
                   for r, n in per_recipe.items()]
    _create_from_rows(con, "exports", rows, _EXPORTS_SCHEMA)
    _create_from_rows(con, "export_counts", counts, _EXPORT_COUNTS_SCHEMA)
    _create_from_rows(con, "export_gate", gated, _EXPORT_GATE_SCHEMA)


def _drop(con: duckdb.DuckDBPyConnection, name: str) -> None:
    is_view = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT internal", [name]).fetchone()[0]
    con.execute(f"DROP {'VIEW' if is_view else 'TABLE'} IF EXISTS {name}")


def _statements(sql: str) -> list[tuple[str, str]]:
    """(table name, statement) for each `CREATE ... TABLE name AS` statement of a script."""
    out = []
    for stmt in (s.strip() for s in sql.split(";\n")):
        if stmt:
            m = re.match(r"CREATE OR REPLACE (?:TEMP )?TABLE (\w+)", stmt)
            out.append((m.group(1) if m else stmt[:30], stmt))
    return out


def step_count() -> int:
    """Steps `build_tables` reports in its `timings`: loading the raw shards, then one per derived table."""
    return 1 + len(_statements(_SQL_CORPUS + ";\n" + _SQL_RUNS + ";\n" + _SQL_TRAJ))


def build_tables(con: duckdb.DuckDBPyConnection, ws: Workspace, run: str | None = None,
                 timings: dict[str, tuple[float, float]] | None = None) -> list[RunDir]:
    """Load the workspace (all runs, or one) into `con`; returns the runs reported on. `timings`, when
    given, receives (wall s, CPU s) per derived table (the benchmark prints them)."""
    w, c = time.perf_counter(), time.process_time()
    runs = run_dirs(ws, run)
    load_raw(con, ws, runs)
    _create_from_rows(con, "runs", manifests(runs), _RUNS_SCHEMA)  # the kept flag reads its verdict_state
    if timings is not None:
        timings["load_raw (find shards, read footers)"] = (time.perf_counter() - w, time.process_time() - c)
    for name, stmt in _statements(_SQL_CORPUS + ";\n" + _SQL_RUNS + ";\n" + _SQL_TRAJ):
        w, c = time.perf_counter(), time.process_time()
        con.execute(stmt)
        if timings is not None:
            timings[name] = (time.perf_counter() - w, time.process_time() - c)
    _exports(con, export_summaries(ws, {r.run_id for r in runs} if run is not None else None))
    for t in ("raw_documents", "raw_pages", "raw_layout", "raw_ingest_errors", "raw_tasks", "raw_trajectories", "raw_verdicts",
              "raw_requests", "traj_raw", "traj_latest", "traj_base", "traj_verdicts", "traj_turn_stats", "traj_crop_stats"):
        _drop(con, t)
    return runs


TABLE_DESCRIPTIONS: dict[str, str] = {
    "documents": "One row per ingested document (corpus/documents); toc and figures are JSON.",
    "pages": "One row per rendered page (corpus/pages): size in raw pixels, text layer, OCR text.",
    "layout_blocks": "Layout blocks (corpus/layout) with the box in raw pixels (x1..y2) and its share of the page area.",
    "ingest_errors": "Ingest errors (corpus/errors.parquet) and task import errors (tasks/import_errors.parquet), with a reason code.",
    "tasks": "Tasks (tasks/*.parquet, each task_id once) with doc_type (from extra), evidence_source (sorted sources joined by '+').",
    "runs": "One row per run folder: its manifest (recipe, status, config hash, stats; status 'unknown' without one) and "
            "verdict_state: missing | fresh | stale (stale: synth added episodes after the filter; export refuses, kept is NULL).",
    "trajectories": "One row per (run, task, sample), newest shard wins; dimensions, turn/crop counts, usage, NDCG, completeness, verdict, kept.",
    "turns": "One row per turn: assistant text, parsed action (kind, invalid reason, `action` struct: query, boxes, answer, ...), observation (kind, text, images as JSON ImageRefs).",
    "crops": "One row per crop of a trajectory: page, raw-pixel box, 0-1000 box, share of the page area.",
    "requests": "Teacher/judge request log (runs/<run>/requests): status ok/error/cached, tokens, latency, retries, error code.",
    "verdicts": "Filter verdicts (runs/<run>/verdicts): pass/fail, reason, reason code, score, is_judge, the trajectory's recipe.",
    "exports": "One row per export summary (exports/**/summary.json); `latest` = newest export of its run.",
    "export_counts": "SFT records written per (export, recipe), from the export summaries.",
    "export_gate": "Records the export gate stopped per (export, recipe, kind:reason code): never written to any format.",
}


def table_counts(con: duckdb.DuckDBPyConnection, names: Sequence[str] = tuple(TABLE_DESCRIPTIONS)) -> dict[str, int]:
    return {n: int(con.execute(f"SELECT count(*) FROM {n}").fetchone()[0]) for n in names}
