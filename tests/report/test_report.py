"""The report's views against numbers computed in Python from the records the fixture wrote."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pytest

from tests.report_fixtures import Built, build_report_workspace, is_invalid
from vrag_data.export.kept import Verdicts
from vrag_data.report import VIEWS, build_report
from vrag_data.rewards.retrieval import ndcg, retrieval_complete
from vrag_data.schema.records import Trajectory


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    b = build_report_workspace(tmp_path_factory.mktemp("report") / "ws")
    build_report(b.ws)
    return b


@pytest.fixture()
def con(built: Built):
    c = duckdb.connect(built.ws.report_db, read_only=True)
    yield c
    c.close()


def _kept(b: Built) -> dict[str, bool]:
    """What the filter kept, via the exporter's own Verdicts logic, per run; a run never filtered kept nothing yet
    (the report does not count "not filtered" as "kept")."""
    out = {}
    for run in ("r1", "r2"):
        v = Verdicts.load(b.ws.run(run))
        out.update({t.traj_id: v.present and v.keep(t) for t in b.trajectories if t.run_id == run})
    return out


def _task(b: Built, t: Trajectory):
    return next(k for k in b.tasks if k.task_id == t.task_id)


def _dict(con, sql: str) -> dict:
    return {r[0] if len(r) == 2 else r[:-1]: r[-1] for r in con.execute(sql).fetchall()}


@pytest.mark.slow
def test_tables_hold_every_record_once(built: Built, con) -> None:
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
              ("documents", "pages", "layout_blocks", "ingest_errors", "tasks", "runs", "trajectories", "turns", "crops", "requests", "verdicts", "exports")}
    assert counts == {
        "documents": 3, "pages": len(built.pages), "layout_blocks": len(built.pages), "ingest_errors": 2,
        "tasks": len({t.task_id for t in built.tasks}), "runs": 2, "trajectories": len(built.trajectories),
        "turns": sum(len(t.turns) for t in built.trajectories), "crops": sum(len(t.crops) for t in built.trajectories),
        "requests": len(built.requests), "verdicts": len(built.verdicts), "exports": 2,
    }
    # the stale shard's `error` copies lost to the newer shard
    status = dict(con.execute("SELECT traj_id, status FROM trajectories").fetchall())
    assert status == {t.traj_id: t.status for t in built.trajectories}


def test_stage_funnel_matches_records(built: Built, con) -> None:
    kept = _kept(built)
    rows = {(r, s): n for r, s, n in con.execute("SELECT recipe, stage, n FROM stage_funnel").fetchall()}
    for recipe in ("vrag_rl", "visor"):
        trajs = [t for t in built.trajectories if t.recipe == recipe]
        task_ids = {t.task_id for t in trajs}
        stems = {s for k in built.tasks if k.task_id in task_ids for s in k.doc_stems}
        assert rows[(recipe, "pages")] == sum(1 for p in built.pages if p.stem in stems)
        assert rows[(recipe, "tasks")] == len(task_ids)
        assert rows[(recipe, "trajectories")] == len(trajs)
        assert rows[(recipe, "kept")] == sum(kept[t.traj_id] for t in trajs)
        assert rows[(recipe, "exported")] == built.exported.get(recipe, 0)  # the newest export only
    assert rows[("(all)", "pages")] == len(built.pages)
    assert rows[("(all)", "tasks")] == len({t.task_id for t in built.tasks})
    assert rows[("(all)", "kept")] == sum(kept.values())
    # the augmented copy has no verdict of its own and inherits its source's
    src = next(t for t in built.trajectories if t.traj_id == "r1-aug-0").extra["source_traj_id"]
    aug = con.execute("SELECT kept, verdict FROM trajectories WHERE traj_id = 'r1-aug-0'").fetchone()
    assert aug[0] == kept[src] and aug[1] == ("pass" if kept[src] else "fail")
    # a run without verdicts keeps what was answered
    assert con.execute("SELECT count(*) FROM trajectories WHERE run_id = 'r2' AND kept <> (status = 'answered')").fetchone()[0] == 0


def test_action_distribution_and_turns(built: Built, con) -> None:
    for recipe in ("vrag_rl", "visor"):
        trajs = [t for t in built.trajectories if t.recipe == recipe]
        want = Counter(u.action.kind for t in trajs for u in t.turns)
        got = _dict(con, f"SELECT action_kind, n FROM action_distribution WHERE recipe = '{recipe}' AND dimension = 'all'")
        assert got == dict(want)
        n_turns = [len(t.turns) for t in trajs]
        mean, med, mx = con.execute(f"SELECT mean_turns, median_turns, max_turns FROM turns_per_trajectory "
                                    f"WHERE recipe = '{recipe}' AND dimension = 'all'").fetchone()
        assert mean == pytest.approx(statistics.fmean(n_turns)) and med == pytest.approx(statistics.median(n_turns)) and mx == max(n_turns)
        hist = _dict(con, f"SELECT n_turns, trajectories FROM turns_histogram WHERE recipe = '{recipe}'")
        assert hist == dict(Counter(n_turns))
        turns = sum(n_turns)
        invalid = sum(1 for t in trajs for u in t.turns if is_invalid(u))
        got_turns, got_invalid, rate, with_inv = con.execute(
            f"SELECT turns, invalid_turns, invalid_rate, trajectories_with_invalid FROM invalid_actions WHERE recipe = '{recipe}' AND dimension = 'all'").fetchone()
        assert (got_turns, got_invalid, with_inv) == (turns, invalid, sum(1 for t in trajs if t.n_invalid > 0))
        assert rate == pytest.approx(invalid / turns)
    reasons = _dict(con, "SELECT recipe, reason, n FROM invalid_reasons")
    assert sum(reasons.values()) == sum(1 for t in built.trajectories for u in t.turns if is_invalid(u))
    refused = sum(1 for t in built.trajectories for u in t.turns if u.action.kind == "crop" and is_invalid(u))
    # the refused crops group under one code whatever their sizes, and say which action was refused
    assert refused > 0 and sum(n for (_, r), n in reasons.items() if r == "refused crop") == refused
    examples = [e for (e,) in con.execute("SELECT example FROM invalid_reasons WHERE reason = 'refused crop'").fetchall()]
    assert examples and all(e.startswith("refused crop: crop ") and "under the minimum" in e for e in examples)


def test_finish_rate_broken_down_by_benchmark(built: Built, con) -> None:
    groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
    for t in built.trajectories:
        groups[(t.recipe, _task(built, t).benchmark or "unknown")].append(t)
    rows = {(r, v): (n, a, e, fr) for r, v, n, a, e, fr in con.execute(
        "SELECT recipe, value, trajectories, answered, error, finish_rate FROM finish_rate WHERE dimension = 'benchmark'").fetchall()}
    assert set(rows) == set(groups)
    for key, trajs in groups.items():
        answered = sum(t.status == "answered" for t in trajs)
        n, a, e, fr = rows[key]
        assert (n, a, e) == (len(trajs), answered, sum(t.status == "error" for t in trajs))
        assert fr == pytest.approx(answered / len(trajs))
    total = con.execute("SELECT trajectories, answered FROM finish_rate WHERE recipe = '(all)' AND dimension = 'all'").fetchone()
    assert total == (len(built.trajectories), sum(t.status == "answered" for t in built.trajectories))


def test_crop_stats(built: Built, con) -> None:
    for recipe in ("vrag_rl", "visor"):
        trajs = [t for t in built.trajectories if t.recipe == recipe]
        crops = [c for t in trajs for c in t.crops]
        areas = [(c.box.norm[2] - c.box.norm[0]) * (c.box.norm[3] - c.box.norm[1]) / 1e6 for c in crops]
        rate, n, mean_area = con.execute(f"SELECT crop_rate, crops, mean_crop_area FROM crop_stats WHERE recipe = '{recipe}' AND dimension = 'all'").fetchone()
        assert rate == pytest.approx(sum(1 for t in trajs if t.crops) / len(trajs))
        assert n == len(crops) and mean_area == pytest.approx(statistics.fmean(areas))
        hist = _dict(con, f"SELECT bin_start, crops FROM crop_size_histogram WHERE recipe = '{recipe}'")
        assert sum(hist.values()) == len(crops)
        assert dict(Counter(min(int(a * 20), 19) / 20 for a in areas)) == pytest.approx(hist)


def test_retrieval_ndcg_and_completeness_by_doc_type(built: Built, con) -> None:
    groups: dict[tuple[str, str], list[tuple[float, bool]]] = defaultdict(list)
    for t in built.trajectories:
        task = _task(built, t)
        if task.evidence_pages:
            groups[(t.recipe, task.extra.get("doc_type", "unknown"))].append(
                (ndcg(t.retrieved_pages, task.evidence_pages), retrieval_complete(t.retrieved_pages, task.evidence_pages)))
    rows = {(r, v): (n, c, m) for r, v, n, c, m in con.execute(
        "SELECT recipe, value, with_gold, completeness_rate, mean_ndcg FROM retrieval_quality WHERE dimension = 'doc_type'").fetchall()}
    for key, vals in groups.items():
        n, c, m = rows[key]
        assert n == len(vals)
        assert m == pytest.approx(statistics.fmean(v[0] for v in vals))
        assert c == pytest.approx(statistics.fmean(float(v[1]) for v in vals))
    # per trajectory too (unanswerable tasks: NULL, not 0)
    got = dict(con.execute("SELECT traj_id, ndcg FROM trajectories").fetchall())
    for t in built.trajectories:
        task = _task(built, t)
        if task.evidence_pages:
            assert got[t.traj_id] == pytest.approx(ndcg(t.retrieved_pages, task.evidence_pages))
        else:
            assert got[t.traj_id] is None


def test_judge_rejections_and_cost(built: Built, con) -> None:
    judged = [v for v in built.verdicts if v.filter == "correctness"]
    n, passed, rate = con.execute("SELECT judged, passed, pass_rate FROM judge_pass_rate WHERE recipe = 'vrag_rl' AND dimension = 'all'").fetchone()
    assert (n, passed) == (len(judged), sum(v.passed for v in judged)) and rate == pytest.approx(passed / n)
    failed = Counter(v.filter for v in built.verdicts if not v.passed)
    got = Counter()
    for f, code, k in con.execute("SELECT filter, reason_code, n FROM rejection_reasons WHERE recipe = 'vrag_rl'").fetchall():
        got[f] += k
        assert not any(ch.isdigit() for ch in code)
    assert got == failed
    assert ("structure", "gold pages never retrieved") in {(f, c) for f, c in con.execute("SELECT filter, reason_code FROM rejection_reasons").fetchall()}
    kept = _kept(built)
    for recipe in ("vrag_rl", "visor"):
        trajs = [t for t in built.trajectories if t.recipe == recipe]
        k = sum(kept[t.traj_id] for t in trajs)
        row = con.execute(f"SELECT kept, requests, tokens, seconds, requests_per_kept, tokens_per_kept, seconds_per_kept FROM cost_per_kept "
                          f"WHERE recipe = '{recipe}' AND dimension = 'all'").fetchone()
        reqs = sum(t.usage.requests for t in trajs)
        toks = sum(t.usage.prompt_tokens + t.usage.completion_tokens for t in trajs)
        secs = sum(t.latency_s for t in trajs)
        assert row[:3] == (k, reqs, toks) and row[3] == pytest.approx(secs)
        if k:
            assert row[4:] == pytest.approx((reqs / k, toks / k, secs / k))
        else:  # a run never filtered: nothing kept yet, so no cost per kept sample
            assert row[4:] == (None, None, None)


def test_request_views(built: Built, con) -> None:
    want = Counter((r.run_id, r.role, r.status) for r in built.requests)
    for run, role, n, ok, cached, errors, retries in con.execute(
            "SELECT run_id, role, requests, ok, cached, errors, retries FROM request_stats").fetchall():
        assert (ok, cached, errors) == (want[(run, role, "ok")], want[(run, role, "cached")], want[(run, role, "error")])
        assert n == ok + cached + errors
        assert retries == sum(r.retries for r in built.requests if (r.run_id, r.role) == (run, role))
    errs = Counter((r.run_id, r.error.split(":")[0].replace("429", "#").replace("30s", "#s")) for r in built.requests if r.status == "error")
    got = Counter()
    for run, code, n in con.execute("SELECT run_id, error_code, n FROM request_errors").fetchall():
        got[(run, code)] += n
    assert got == errs


def test_every_view_is_documented_and_answers(con) -> None:
    names = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {v.name for v in VIEWS} <= names
    for v in VIEWS:
        assert len(v.description) > 40
        comment = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = ?", [v.name]).fetchone()[0]
        assert comment == v.description
        con.execute(f"SELECT * FROM {v.name}").fetchall()


@pytest.mark.slow
def test_single_run_report(tmp_path: Path) -> None:
    b = build_report_workspace(tmp_path / "ws")
    build_report(b.ws, "r2")
    c = duckdb.connect(b.ws.report_db, read_only=True)
    try:
        assert c.execute("SELECT DISTINCT run_id FROM trajectories").fetchall() == [("r2",)]
        assert c.execute("SELECT count(*) FROM requests WHERE run_id <> 'r2'").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM exports").fetchone()[0] == 0  # the exports are of r1
        assert c.execute("SELECT count(*) FROM trajectories").fetchone()[0] == sum(t.run_id == "r2" for t in b.trajectories)
    finally:
        c.close()


@pytest.mark.slow
def test_empty_workspace_gives_empty_tables(tmp_path: Path) -> None:
    from vrag_data.store import Workspace

    ws = Workspace(str(tmp_path / "empty")).makedirs()
    res = build_report(ws)
    assert res.runs == [] and set(res.counts.values()) == {0}
    c = duckdb.connect(ws.report_db, read_only=True)
    try:
        for v in VIEWS:
            c.execute(f"SELECT * FROM {v.name}").fetchall()
        assert c.execute("SELECT n FROM stage_funnel WHERE recipe = '(all)' ORDER BY stage_order").fetchall() == [(0,)] * 5
    finally:
        c.close()
    assert "no rows" in Path(ws.report_html).read_text()


def test_readme_documents_every_table_and_view() -> None:
    from vrag_data.report.tables import TABLE_DESCRIPTIONS
    from vrag_data.report.views import readme_text

    readme = (Path(__file__).resolve().parents[2] / "vrag_data" / "report" / "README.md").read_text()
    assert readme == readme_text(), "regenerate: python -m vrag_data.report.views > vrag_data/report/README.md"
    for name in TABLE_DESCRIPTIONS:
        assert f"- `{name}`: " in readme
    for v in VIEWS:
        assert f"- `{v.name}`: {v.description}" in readme


@pytest.mark.slow
def test_report_over_an_fsspec_workspace(built: Built) -> None:
    """A workspace behind an fsspec URL (memory:// here, s3:// in production) gives the same tables."""
    import uuid

    import fsspec

    from vrag_data.store import Workspace

    fs = fsspec.filesystem("memory")
    root = f"/report-{uuid.uuid4().hex}"
    for sub in ("corpus", "tasks", "runs", "exports"):
        fs.put(str(Path(built.ws.root) / sub), f"{root}/{sub}", recursive=True)
    ws = Workspace(f"memory://{root}")
    res = build_report(ws)
    assert res.counts["trajectories"] == len(built.trajectories) and res.counts["exports"] == 2
    assert fs.exists(f"{root}/report.duckdb") and fs.exists(f"{root}/report.html")
    fs.rm(root, recursive=True)


@pytest.mark.slow
def test_foreign_shards_in_a_run_folder_are_left_out(tmp_path: Path) -> None:
    """A parquet file of another record type beside the verdicts (a stray log) does not break the tables."""
    from vrag_data.schema.records import RequestLog
    from vrag_data.store import write_records

    b = build_report_workspace(tmp_path / "ws")
    write_records(b.ws.path("runs", "r1", "verdicts", "stray-requests.parquet"),
                  [RequestLog(request_id="x", run_id="r1", role="judge", model="m", endpoint="e", status="ok")], RequestLog)
    res = build_report(b.ws)
    assert res.counts["verdicts"] == len(b.verdicts) and res.counts["requests"] == len(b.requests)


def test_histogram_bins_are_dense_so_the_axis_is_linear():
    from vrag_data.report.charts import dense_bins

    # crops in bins 0.05 and 0.30 only: every bin from 0.00 to 0.95 is drawn, the empty ones at 0
    got = dense_bins([(0.05, 3), (0.3, 1)], [i / 20 for i in range(20)])
    assert len(got) == 20 and got[0] == (0.0, 0.0) and got[1] == (0.05, 3.0) and got[6] == (0.3, 1.0)
    assert sum(n for _, n in got) == 4
    # turns 1, 2 and 5: bins 1..5 with 3 and 4 empty
    assert dense_bins([(1, 4), (2, 2), (5, 1)], range(1, 6)) == [(1, 4.0), (2, 2.0), (3, 0.0), (4, 0.0), (5, 1.0)]


def test_configured_fallbacks_are_counted(built: Built, con) -> None:
    def uses(t) -> int:
        return sum(1 for g in t.extra.get("grounding", []) if g.get("fallback"))

    want = {}
    for t in built.trajectories:
        if uses(t):
            n, k = want.get((t.run_id, "teacher_box"), (0, 0))
            want[(t.run_id, "teacher_box")] = (n + uses(t), k + 1)
    got = {(r, f): (u, k) for r, f, u, k in con.execute("SELECT run_id, fallback, uses, trajectories FROM fallbacks").fetchall()}
    assert want and got == want
    html = Path(built.ws.report_html).read_text(encoding="utf-8")
    total = sum(u for u, _ in want.values())
    assert f'fallbacks used<b>{total}</b>' in html
