"""The report's SQL views, each with a description (`vrag-data report --describe`, the README).

Most views are broken down the same way: one row per recipe and `dimension` (`all`, `benchmark`,
`doc_type`, `evidence_source`) and `value` of that dimension; recipe `(all)` aggregates every recipe.
They read the per-trajectory facts precomputed in `trajectories`, so each is one grouped scan.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from vrag_data.report.tables import reason_code


@dataclass(frozen=True)
class View:
    name: str
    description: str
    sql: str


_DIM_SETS = "GROUPING SETS ((recipe{x}), (recipe, benchmark{x}), (recipe, doc_type{x}), (recipe, evidence_source{x}), ({y}))"
_DIM_COLS = """CASE WHEN grouping(benchmark) = 0 THEN 'benchmark' WHEN grouping(doc_type) = 0 THEN 'doc_type'
            WHEN grouping(evidence_source) = 0 THEN 'evidence_source' ELSE 'all' END AS dimension,
       CASE WHEN grouping(benchmark) = 0 THEN benchmark WHEN grouping(doc_type) = 0 THEN doc_type
            WHEN grouping(evidence_source) = 0 THEN evidence_source ELSE 'all' END AS value,
       CASE WHEN grouping(recipe) = 1 THEN '(all)' ELSE recipe END AS recipe"""


def by_dims(aggs: str, source: str = "trajectories", extra_key: str = "") -> str:
    """`aggs` grouped by recipe x (all | benchmark | doc_type | evidence_source) [x extra_key]."""
    x = f", {extra_key}" if extra_key else ""
    sets = _DIM_SETS.format(x=x, y=extra_key)
    key = f"{extra_key}, " if extra_key else ""
    return f"SELECT {_DIM_COLS}, {key}{aggs} FROM {source} GROUP BY {sets}"


def _order(sql: str, extra: str = "") -> str:
    return f"SELECT * FROM ({sql}) ORDER BY recipe = '(all)' DESC, recipe, dimension = 'all' DESC, dimension, value{extra}"


VIEWS: list[View] = [
    View(
        "stage_funnel",
        "Yield per stage and recipe: pages (of the documents the recipe's tasks use; corpus-wide for (all)) -> "
        "tasks (with a trajectory; every imported task for (all)) -> trajectories -> kept (passed every filter) -> "
        "exported (SFT records of each run's newest export). share_of_previous = n / previous stage's n.",
        """
WITH stem_pages AS (SELECT stem, count(*) AS n FROM pages GROUP BY stem),
recipe_tasks AS (SELECT DISTINCT recipe, task_id FROM trajectories),
recipe_stems AS (SELECT DISTINCT rt.recipe, unnest(from_json(t.doc_stems, '["VARCHAR"]')) AS stem
                 FROM recipe_tasks rt JOIN tasks t USING (task_id)),
recipes AS (SELECT DISTINCT recipe FROM trajectories UNION SELECT DISTINCT recipe FROM export_counts WHERE latest),
stages AS (
  SELECT r.recipe, 1 AS stage_order, 'pages' AS stage,
         (SELECT coalesce(sum(sp.n), 0) FROM recipe_stems rs JOIN stem_pages sp USING (stem) WHERE rs.recipe = r.recipe) AS n FROM recipes r
  UNION ALL SELECT r.recipe, 2, 'tasks', (SELECT count(*) FROM recipe_tasks rt WHERE rt.recipe = r.recipe) FROM recipes r
  UNION ALL SELECT r.recipe, 3, 'trajectories', (SELECT count(*) FROM trajectories t WHERE t.recipe = r.recipe) FROM recipes r
  UNION ALL SELECT r.recipe, 4, 'kept', (SELECT count(*) FROM trajectories t WHERE t.recipe = r.recipe AND t.kept) FROM recipes r
  UNION ALL SELECT r.recipe, 5, 'exported', (SELECT coalesce(sum(records), 0) FROM export_counts e WHERE e.latest AND e.recipe = r.recipe) FROM recipes r
  UNION ALL SELECT '(all)', 1, 'pages', (SELECT count(*) FROM pages)
  UNION ALL SELECT '(all)', 2, 'tasks', (SELECT count(*) FROM tasks)
  UNION ALL SELECT '(all)', 3, 'trajectories', (SELECT count(*) FROM trajectories)
  UNION ALL SELECT '(all)', 4, 'kept', (SELECT count(*) FROM trajectories WHERE kept)
  UNION ALL SELECT '(all)', 5, 'exported', (SELECT coalesce(sum(records), 0) FROM export_counts WHERE latest)
)
SELECT recipe, stage_order, stage, n,
       n / nullif(lag(n) OVER (PARTITION BY recipe ORDER BY stage_order), 0) AS share_of_previous
FROM stages ORDER BY recipe = '(all)' DESC, recipe, stage_order""",
    ),
    View(
        "rejection_reasons",
        "Failed filter verdicts per recipe, filter and reason code (the reason without numbers and details); "
        "share = n / all failed verdicts of the recipe; example = one full reason. Largest causes first.",
        """
WITH f AS (SELECT coalesce(recipe, '(unknown)') AS recipe, filter, reason_code, reason FROM verdicts WHERE NOT passed)
SELECT recipe, filter, reason_code, count(*) AS n,
       count(*) / sum(count(*)) OVER (PARTITION BY recipe) AS share, any_value(reason) AS example
FROM f GROUP BY recipe, filter, reason_code ORDER BY n DESC, recipe, filter, reason_code""",
    ),
    View(
        "export_gate_stops",
        "Records the export gate stopped in each run's newest export, per recipe and reason (kind:code: an SFT "
        "record or RL row that is no clean training sample of its recipe: a rejected or truncated turn, a control "
        "character, a box outside its page, no evidence gathered, ...); `unfiltered` = the export was asked to ignore "
        "the filter's verdicts. Largest causes first.",
        """
SELECT g.run_id, g.recipe, g.reason_code, sum(g.records) AS records, bool_or(e.unfiltered) AS unfiltered
FROM export_gate g LEFT JOIN exports e ON e.out_dir = g.out_dir AND e.latest
WHERE g.latest GROUP BY g.run_id, g.recipe, g.reason_code ORDER BY records DESC, g.run_id, g.recipe, g.reason_code""",
    ),
    View(
        "action_distribution",
        "Parsed actions per kind (think, search, select, crop, read, answer, invalid, ...): n turns and share of "
        "the group's turns, by recipe and dimension.",
        _order(
            "SELECT *, n / sum(n) OVER (PARTITION BY recipe, dimension, value) AS share FROM ("
            + by_dims("count(*) AS n", "turns", "action_kind") + ") WHERE action_kind IS NOT NULL",
            ", n DESC",
        ),
    ),
    View(
        "turns_histogram",
        "Histogram of turns per trajectory: trajectories with exactly n_turns turns, per recipe (and (all)).",
        """
SELECT coalesce(recipe, '(all)') AS recipe, n_turns, count(*) AS trajectories,
       count(*) / sum(count(*)) OVER (PARTITION BY coalesce(recipe, '(all)')) AS share
FROM trajectories GROUP BY GROUPING SETS ((recipe, n_turns), (n_turns))
ORDER BY recipe = '(all)' DESC, recipe, n_turns""",
    ),
    View(
        "turns_per_trajectory",
        "Turns per trajectory: mean, median, p90 and max, by recipe and dimension.",
        _order(by_dims("count(*) AS trajectories, avg(n_turns) AS mean_turns, median(n_turns) AS median_turns, "
                       "quantile_cont(n_turns, 0.9) AS p90_turns, max(n_turns) AS max_turns")),
    ),
    View(
        "crop_stats",
        "Crop rate (share of trajectories with at least one crop), crops per trajectory and mean crop size "
        "(share of the page area, from the 0-1000 box), by recipe and dimension.",
        _order(by_dims("count(*) AS trajectories, count(*) FILTER (WHERE n_crops > 0) AS with_crop, "
                       "count(*) FILTER (WHERE n_crops > 0) / count(*) AS crop_rate, sum(n_crops) AS crops, "
                       "sum(n_crops) / count(*) AS crops_per_trajectory, "
                       "sum(crop_area_sum) / nullif(sum(n_crops), 0) AS mean_crop_area")),
    ),
    View(
        "crop_size_histogram",
        "Histogram of crop sizes per recipe: crops whose area is in [bin_start, bin_start + 0.05) of the page.",
        """
SELECT coalesce(recipe, '(all)') AS recipe, least(floor(area_frac * 20), 19) / 20 AS bin_start, count(*) AS crops,
       count(*) / sum(count(*)) OVER (PARTITION BY coalesce(recipe, '(all)')) AS share
FROM crops GROUP BY GROUPING SETS ((recipe, bin_start), (bin_start))
ORDER BY recipe = '(all)' DESC, recipe, bin_start""",
    ),
    View(
        "invalid_actions",
        "Invalid-action rate: invalid turns / turns, and the share of trajectories with at least one invalid "
        "action (the trajectory's n_invalid counter), by recipe and dimension.",
        _order(by_dims("sum(n_turns) AS turns, sum(n_invalid_turns) AS invalid_turns, "
                       "sum(n_invalid_turns) / nullif(sum(n_turns), 0) AS invalid_rate, count(*) AS trajectories, "
                       "count(*) FILTER (WHERE n_invalid > 0) AS trajectories_with_invalid, "
                       "count(*) FILTER (WHERE n_invalid > 0) / count(*) AS trajectory_invalid_rate")),
    ),
    View(
        "invalid_reasons",
        "Why actions were invalid (replies the parser refused, and well-formed actions the environment refused, such "
        "as a crop under the minimum size): invalid turns per recipe and reason code (ids and numbers removed), "
        "largest first, with one full example.",
        f"""
SELECT recipe, coalesce({reason_code('invalid_reason')}, '(none)') AS reason, count(*) AS n,
       any_value(invalid_reason) AS example
FROM turns WHERE is_invalid GROUP BY ALL ORDER BY n DESC, recipe, reason""",
    ),
    View(
        "finish_rate",
        "Finish status counts (answered, budget = the turn budget ran out, no_answer, error) and finish rate = "
        "answered / trajectories, "
        "by recipe, policy (oracle or model: never merged) and dimension.",
        _order(by_dims("count(*) AS trajectories, count(*) FILTER (WHERE status = 'answered') AS answered, "
                       "count(*) FILTER (WHERE status IN ('budget', 'max_turns')) AS budget, "  # max_turns: runs written before the rule
                       "count(*) FILTER (WHERE status = 'no_answer') AS no_answer, "
                       "count(*) FILTER (WHERE status = 'error') AS error, "
                       "count(*) FILTER (WHERE status = 'answered') / count(*) AS finish_rate", extra_key="policy")),
    ),
    View(
        "retrieval_quality",
        "Retrieval over trajectories whose task has gold pages: completeness rate (every gold page retrieved) and "
        "mean NDCG (binary relevance over the de-duplicated retrieval order, VRAG-RL's formula), by recipe and dimension.",
        _order(by_dims("count(*) FILTER (WHERE ndcg IS NOT NULL) AS with_gold, "
                       "avg(CASE WHEN retrieval_complete THEN 1.0 WHEN NOT retrieval_complete THEN 0.0 END) AS completeness_rate, "
                       "avg(ndcg) AS mean_ndcg, avg(len(retrieved_pages)) AS mean_pages_retrieved")),
    ),
    View(
        "judge_pass_rate",
        "Answer-judge verdicts (of every filter that judges the answer: `judges_answers`): trajectories judged, passed (every judge verdict "
        "passed), pass rate and mean judge score, by recipe, policy (never merged) and dimension.",
        _order(by_dims("count(*) FILTER (WHERE judge_passed IS NOT NULL) AS judged, count(*) FILTER (WHERE judge_passed) AS passed, "
                       "count(*) FILTER (WHERE judge_passed) / nullif(count(*) FILTER (WHERE judge_passed IS NOT NULL), 0) AS pass_rate, "
                       "avg(judge_score) AS mean_score", extra_key="policy")),
    ),
    View(
        "cost_per_kept",
        "What a kept sample cost: requests, prompt+completion tokens and episode seconds of ALL trajectories of the "
        "group (kept or not) divided by the kept ones (NULL when none kept), by recipe, policy (never merged) and dimension.",
        _order(by_dims("count(*) AS trajectories, count(*) FILTER (WHERE kept) AS kept, sum(requests) AS requests, "
                       "sum(prompt_tokens + completion_tokens) AS tokens, sum(latency_s) AS seconds, "
                       "sum(requests) / nullif(count(*) FILTER (WHERE kept), 0) AS requests_per_kept, "
                       "sum(prompt_tokens + completion_tokens) / nullif(count(*) FILTER (WHERE kept), 0) AS tokens_per_kept, "
                       "sum(latency_s) / nullif(count(*) FILTER (WHERE kept), 0) AS seconds_per_kept", extra_key="policy")),
    ),
    View(
        "request_stats",
        "Request log per run, role and model: requests, ok, cached (cache hits), errors, cache-hit rate, retries, "
        "tokens, mean and p95 latency (seconds).",
        """
SELECT run_id, role, model, count(*) AS requests, count(*) FILTER (WHERE status = 'ok') AS ok,
       count(*) FILTER (WHERE cache_hit) AS cached, count(*) FILTER (WHERE is_error) AS errors,
       count(*) FILTER (WHERE cache_hit) / count(*) AS cache_hit_rate, sum(retries) AS retries,
       sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
       avg(latency_s) AS mean_latency_s, quantile_cont(latency_s, 0.95) AS p95_latency_s
FROM requests GROUP BY ALL ORDER BY run_id, role, model""",
    ),
    View(
        "fallbacks",
        "Configured fallbacks used (a recipe option asked for them, e.g. keeping the teacher's box when the grounding "
        "expert gives none): uses and trajectories per run, recipe and fallback. Empty when none was used.",
        """
SELECT run_id, recipe, policy, f AS fallback, count(*) AS uses, count(DISTINCT traj_id) AS trajectories
FROM (SELECT run_id, recipe, policy, traj_id, unnest(fallbacks) AS f FROM trajectories)
GROUP BY ALL ORDER BY uses DESC, run_id, fallback""",
    ),
    View(
        "request_errors",
        "Failed requests per run, role, model, endpoint and error code; share = n / all requests of that "
        "run+role+model; example = one full error.",
        """
WITH tot AS (SELECT run_id, role, model, count(*) AS total FROM requests GROUP BY ALL)
SELECT r.run_id, r.role, r.model, r.endpoint, r.error_code, count(*) AS n, count(*) / any_value(tot.total) AS share,
       sum(r.retries) AS retries, any_value(r.error) AS example
FROM requests r JOIN tot USING (run_id, role, model) WHERE r.is_error
GROUP BY r.run_id, r.role, r.model, r.endpoint, r.error_code ORDER BY n DESC, r.run_id, r.role""",
    ),
    View(
        "ingest_error_summary",
        "Ingest and task-import errors per origin, stage and reason code.",
        """
SELECT origin, stage, reason_code, count(*) AS n, count(DISTINCT path) AS files, any_value(reason) AS example
FROM ingest_errors GROUP BY ALL ORDER BY n DESC, origin, stage""",
    ),
]

VIEW_BY_NAME = {v.name: v for v in VIEWS}


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    for v in VIEWS:
        con.execute(f"CREATE OR REPLACE VIEW {v.name} AS {v.sql}")
        con.execute(f"COMMENT ON VIEW {v.name} IS {_sql_str(v.description)}")


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def describe() -> str:
    """`name: description` for every table and view, as `vrag-data report --describe` prints it."""
    from vrag_data.report.tables import TABLE_DESCRIPTIONS

    lines = ["Tables:"]
    lines += [f"  {n}: {d}" for n, d in TABLE_DESCRIPTIONS.items()]
    lines.append("Views (dimension = all | benchmark | doc_type | evidence_source; recipe '(all)' = every recipe):")
    lines += [f"  {v.name}: {v.description}" for v in VIEWS]
    from vrag_data.report.answers import DESCRIPTION, NAME

    lines.append(f"  {NAME} (table): {DESCRIPTION}")
    return "\n".join(lines)


_README_INTRO = """# The data-quality report

`vrag-data report -w WORKSPACE [--run RUN]` writes `WORKSPACE/report.duckdb` (tables and the views below; open it with
`duckdb WORKSPACE/report.duckdb`) and `WORKSPACE/report.html` (one offline page: funnel, histograms, tables and a
trajectory viewer that draws crop boxes over the pages). The HTML is self-contained: page thumbnails (480 px on the
long side, up to 24 MB in all; a page past that says so on its figure) are embedded, so the file alone can be copied
or mailed. Re-running rebuilds both and swaps them in atomically. `vrag-data report --describe` prints this list.

Most views have one row per `recipe` x `dimension` x `value`: `dimension` is `all`, `benchmark`, `doc_type`
(the task's `extra.doc_type`) or `evidence_source` (the task's sources, sorted and joined by `+`); recipe `(all)`
aggregates every recipe. Kept = what `vrag-data export` keeps (all verdicts passed); it is NULL, and counts nowhere,
for a run not filtered yet and for a run whose verdicts are out of date (`runs.verdict_state = 'stale'`: synth added
episodes after the filter; the export refuses such a run, and the summary and HTML say "verdicts out of date").
NDCG and completeness are NULL for tasks without gold pages.

"""


def readme_text() -> str:
    """vrag_data/report/README.md (regenerate with `python -m vrag_data.report.views > vrag_data/report/README.md`)."""
    from vrag_data.report.tables import TABLE_DESCRIPTIONS

    lines = [_README_INTRO + "## Tables", ""]
    lines += [f"- `{n}`: {d}" for n, d in TABLE_DESCRIPTIONS.items()]
    lines += ["", "## Views", ""]
    lines += [f"- `{v.name}`: {v.description}" for v in VIEWS]
    lines += ["", "Example: `duckdb -readonly ws/report.duckdb \"SELECT * FROM finish_rate WHERE dimension = 'benchmark'\"`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(readme_text(), end="")
