"""The report's "answers vs gold" table: per run and judge, how often the judge passed the answers and how often
the rule scorer finds them equal to the gold answer. A judge far more lenient than the gold (or one that is the
policy's own model, `same_as: policy`) shows at a glance: a policy answering "42" to everything that judges itself
gets pass rate 1.0 against gold agreement 0.0.

The judge of a verdict is read from the correctness verdict's reason, which names it ("rules score ...",
"judge <model> score ...", "judge <model> (same_as policy) score ..."; `vrag_data.filters.quality.Correctness`).
Gold agreement is computed here with the rule scorers (`vrag_data.rewards.answer`); an answer that declines
("insufficient to answer") where retrieval missed a gold page counts as agreeing (the honest answer for that
context, as EVisRAG and VISOR's honesty check count it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from vrag_data.rewards.answer import answer_correct, is_unanswerable

NAME = "answers_vs_gold"
GAP_FLAG = 0.3  # judge pass rate above gold agreement by more than this: a lenient judge
DESCRIPTION = (
    "Answers vs gold, per run and judge (from the correctness verdicts): n judged, judge pass rate, gold agreement "
    "(the rule scorer: final answer vs the task's gold answer; declining when retrieval missed a gold page agrees) "
    f"and gap = pass rate - gold agreement. flag says why a row is suspect: the judge is another role (same_as, e.g. "
    f"the policy judging itself) or the gap exceeds {GAP_FLAG}."
)

_JUDGE = re.compile(r"^(rules|stored judge|judge (.+?)(?: \(same_as (\w+)\))?) score ")

_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("recipe", pa.string()), ("policy", pa.string()), ("judge", pa.string()),
    ("judge_model", pa.string()), ("same_as", pa.string()), ("n", pa.int64()), ("judge_passed", pa.int64()),
    ("judge_pass_rate", pa.float64()), ("gold_agreed", pa.int64()), ("gold_agreement", pa.float64()),
    ("gap", pa.float64()), ("flagged", pa.bool_()), ("flag", pa.string()),
])


def parse_judge(reason: str) -> tuple[str, str, str]:
    """(judge label, judge model, same_as) from a correctness verdict's reason; ("unknown", "", "") if it names none."""
    m = _JUDGE.match(reason or "")
    if m is None:
        return "unknown", "", ""
    return m.group(1), m.group(2) or "", m.group(3) or ""


def gold_agrees(answer: str | None, gold: str, answer_format: str | None, retrieval_complete: bool | None) -> bool:
    if not answer:
        return False
    if retrieval_complete is False and is_unanswerable(answer):
        return True
    return answer_correct(answer, gold, answer_format) >= 0.5


def rows(facts: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Group (run_id, recipe, policy, passed, reason, final_answer, gold, answer_format, retrieval_complete) rows."""
    groups: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for run_id, recipe, policy, passed, reason, answer, gold, fmt, complete in facts:
        label, model, same = parse_judge(reason)
        g = groups.setdefault((run_id, recipe or "", policy or "", label), {
            "run_id": run_id, "recipe": recipe or "", "policy": policy or "", "judge": label, "judge_model": model,
            "same_as": same, "n": 0, "judge_passed": 0, "gold_agreed": 0})
        g["n"] += 1
        g["judge_passed"] += bool(passed)
        g["gold_agreed"] += gold_agrees(answer, gold or "", fmt, complete)
    out = []
    for g in groups.values():
        g["judge_pass_rate"] = g["judge_passed"] / g["n"]
        g["gold_agreement"] = g["gold_agreed"] / g["n"]
        g["gap"] = g["judge_pass_rate"] - g["gold_agreement"]
        why = []
        if g["same_as"]:
            why.append(f"judge is the {g['same_as']} (same_as {g['same_as']})")
        if g["gap"] > GAP_FLAG:
            why.append(f"pass rate exceeds gold agreement by {g['gap']:.2f} (> {GAP_FLAG})")
        g["flagged"], g["flag"] = bool(why), "; ".join(why)
        out.append(g)
    return sorted(out, key=lambda g: (g["run_id"], g["recipe"], g["judge"]))


def build_answers(con: duckdb.DuckDBPyConnection) -> None:
    """Create the table from `verdicts`, `trajectories` and `tasks` (already in `con`)."""
    facts = con.execute("""
        SELECT v.run_id, t.recipe, t.policy, v.passed, v.reason, t.final_answer, k.answer, k.answer_format,
               t.retrieval_complete
        FROM verdicts v
        JOIN trajectories t ON t.traj_id = v.traj_id AND t.run_id = v.run_id
        LEFT JOIN tasks k ON k.task_id = t.task_id
        WHERE v.filter = 'correctness' AND t.final_answer IS NOT NULL
    """).fetchall()
    table = pa.Table.from_pylist(rows(facts), schema=_SCHEMA)
    con.register("_answers_rows", table)
    try:
        con.execute(f"CREATE OR REPLACE TABLE {NAME} AS SELECT * FROM _answers_rows")
    finally:
        con.unregister("_answers_rows")
    con.execute(f"COMMENT ON TABLE {NAME} IS '" + DESCRIPTION.replace("'", "''") + "'")


def answer_lines(con: duckdb.DuckDBPyConnection) -> list[str]:
    """One line per row, for `vrag-data report`'s text output (flagged rows say why)."""
    try:
        got = con.execute(f"SELECT run_id, judge, n, judge_pass_rate, gold_agreement, gap, flag FROM {NAME} "
                          "ORDER BY run_id, judge").fetchall()
    except duckdb.Error:  # a report built before this table existed
        return []
    return [f"answers vs gold: run {r} judge {j}: n {n}, judge pass rate {p:.3f}, gold agreement {a:.3f}, gap {g:+.3f}"
            + (f"  FLAG: {f}" if f else "") for r, j, n, p, a, g, f in got]


def html_section(con: duckdb.DuckDBPyConnection) -> str:
    from vrag_data.report.charts import esc, table

    cur = con.execute(f"SELECT * FROM {NAME} ORDER BY flagged DESC, run_id, judge")
    cols = [d[0] for d in cur.description]
    return f'<h3>{esc(NAME)}</h3><p class="desc">{esc(DESCRIPTION)}</p>{table(cols, cur.fetchall(), 60)}'
