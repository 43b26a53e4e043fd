"""A flaky teacher (20% HTTP 500, 5% 429, latency spikes past the client timeout, dropped connections,
truncated JSON, empty choices) behind the real `vrag-data synth`: the run finishes, every episode has a
status (and a reason when it did not answer), no request is tried more than `max_retries + 1` times, and
`vrag-data report` shows the failures broken down."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest
import yaml

from tests.support.openai_server import Faults, OpenAIServer
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.schema.records import RequestLog
from vrag_data.store import read_records
from vrag_data.synth.ledger import read_manifest, read_trajectories

MAX_RETRIES = 3
SAMPLES = 2
FAULTS = Faults(p500=0.20, p429=0.05, p_drop=0.03, p_truncate=0.03, p_empty=0.03, spike_p=0.05, spike_s=1.0)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


@pytest.mark.slow
def test_flaky_teacher_run_finishes_with_bounded_retries_and_the_report_breaks_errors_down(ws, tmp_path):
    run = "fault-flaky"
    with OpenAIServer(reply=teacher, faults=FAULTS, seed=7) as srv:
        policy = {"endpoints": [{"base_url": srv.base_url, "model": "teacher"}], "max_retries": MAX_RETRIES,
                  "backoff_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 0.5,  # a 1 s spike is a client timeout
                  "sampling": {"temperature": 0.0, "max_tokens": 512}}
        cfg = tmp_path / "cfg.yaml"
        roles = {"policy": policy, "grounding": {"same_as": "policy"}, "judge": {"kind": "rules"}}  # every role named
        cfg.write_text(yaml.safe_dump({"roles": roles, "synth": {"concurrent_episodes": 16}}))
        out = cli("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--samples", SAMPLES, "--run", run, "-q")
        seen = srv.requests

    outcomes = Counter(r.outcome for r in seen)
    assert {"500", "429", "drop", "truncate", "empty", "slow"} <= set(outcomes), outcomes  # every fault was served
    # Retries are bounded. Two episodes can send the very same request (same page, same thought to the
    # grounding expert): a failed one is not cached, so the next episode tries it again. Hence the bound is
    # per client call, from the run's request log: each call made at most max_retries + 1 attempts, and the
    # server saw no more attempts of a request than its calls made together.
    logs = read_records(str(ws / "runs" / run / "requests"), RequestLog)
    assert logs and max(r.retries for r in logs) <= MAX_RETRIES
    allowed = Counter()
    for r in logs:
        if r.status != "cached":
            allowed[r.request_id] += r.retries + 1
    per_id = Counter(r.request_id for r in seen)
    assert all(n <= allowed[rid] for rid, n in per_id.items()), [(rid, n, allowed[rid]) for rid, n in per_id.items() if n > allowed[rid]]
    gave_up = [r for r in logs if r.status == "error"]
    assert gave_up, "with these rates and seed some request must exhaust its retries"
    assert all(r.retries == MAX_RETRIES for r in gave_up if "gave up after" in r.error)

    run_dir = ws / "runs" / run
    trajs = read_trajectories(run_dir)
    n_tasks = len({t.task_id for t in trajs})
    assert len(trajs) == n_tasks * SAMPLES  # the run finished: every (task, sample) has a trajectory
    statuses = Counter(t.status for t in trajs)
    assert set(statuses) <= {"answered", "budget", "no_answer", "error"}
    for t in trajs:
        if t.status != "answered":
            assert t.reason.strip(), f"{t.task_id}/{t.sample}: status {t.status} without a reason"
        if t.status == "error":
            assert f"gave up after {MAX_RETRIES + 1} attempts" in t.reason, t.reason
    assert statuses["error"] >= 1 and statuses["answered"] >= 1, statuses
    assert read_manifest(run_dir).status == "finished"
    assert "ended in error" in out or statuses["error"] == 0

    cli("report", "-w", ws, "--run", run)
    con = duckdb.connect(str(ws / "report.duckdb"), read_only=True)
    try:
        errors = con.execute("SELECT error_code, n, example FROM request_errors WHERE run_id = ?", [run]).fetchall()
        by_status = dict(con.execute("SELECT status, count(*) FROM trajectories WHERE run_id = ? GROUP BY status", [run]).fetchall())
    finally:
        con.close()
    assert sum(n for _, n, _ in errors) == len(gave_up)  # each exhausted request is in the breakdown once
    kinds = ("server error", "rate limited", "timeout", "connection error", "truncated or invalid json", "empty response")
    for code, _, example in errors:  # grouped by what went wrong, not lumped together
        assert code.lower().startswith(kinds) and "gave up after" in example, (code, example)
    assert by_status == dict(statuses)
    html = (ws / "report.html").read_text()
    assert "gave up after" in html  # the breakdown is in the page a user opens
