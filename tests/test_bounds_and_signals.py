"""Hostile counts and signals: a count out of range stops in one line before any request; SIGTERM stops a running
synth within seconds and leaves it resumable; a resumed stage's rate counts only this process's work."""

from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import OpenAIServer
from tests.support.synth_workspace import sample_workspace
from vrag_data.cli.main import app
from vrag_data.config import ConfigError, check_bound, load_config
from vrag_data.progress import LineProgress

CLI = [sys.executable, "-m", "vrag_data.cli.main"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return sample_workspace(tmp_path_factory.getbasetemp())


def _config(path: Path, base_url: str) -> Path:
    policy = {"endpoints": [{"base_url": base_url, "model": "teacher"}], "max_retries": 0, "timeout_s": 60}
    roles = {"policy": policy, **{r: {"same_as": "policy"} for r in ("judge", "grounding", "reader", "planner", "student")}}
    path.write_text(yaml.safe_dump({"roles": roles}))
    return path


def _error_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("error:")]


# -- bounds ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("setting", "value", "allowed"), [
    ("synth.samples", 1_000_000_000, "1..1024"),
    ("synth.samples", 0, "1..1024"),
    ("synth.limit", -1, "1..10_000_000"),
    ("tasks.generate.n", 10**12, "1..10_000_000"),
    ("tasks.generate.search_top_k", 0, "1..100"),
    ("synth.concurrent_episodes", 10**7, "1..4096"),
    ("roles.policy.max_retries", 10**6, "0..100"),
    ("roles.policy.sampling.top_p", 0, "> 0 and <= 1"),
])
def test_a_count_out_of_range_is_one_line_with_its_range_and_fix(setting, value, allowed):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"{setting}={value}"])
    msg = str(err.value)
    assert "\n" not in msg
    assert f"{setting} = {value} is out of range (allowed: {allowed})" in msg and f"--set {setting}=N" in msg, msg


def test_a_flag_out_of_range_names_the_flag():
    with pytest.raises(ConfigError) as err:
        check_bound("synth.samples", 5000, "--samples")
    assert str(err.value) == ("synth.samples = 5000 is out of range (allowed: 1..1024); pass a value in range "
                              "(--samples N or --set synth.samples=N)")
    check_bound("synth.samples", 1024, "--samples")  # the top of the range is allowed


@pytest.mark.slow
def test_samples_1e9_stops_in_one_line_with_exit_2_and_no_request(ws, tmp_path):
    """The issue's command: it used to plan a billion episodes (memory growing ~24 MB/s, nothing sent)."""
    with OpenAIServer(reply="<answer>x</answer>") as srv:
        cfg = _config(tmp_path / "cfg.yaml", srv.base_url)
        for extra in (["--set", "synth.samples=1000000000"], ["--samples", "1000000000"]):
            try:
                r = subprocess.run([*CLI, "synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg), "--limit", "1",
                                    "--run", "too-many", *extra], capture_output=True, text=True, timeout=180)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{extra}: still running after 180 s instead of refusing the count")
            assert r.returncode == 2, r.stderr[-2000:]
            errors = _error_lines(r.stderr)
            assert len(errors) == 1 and "synth.samples = 1000000000 is out of range (allowed: 1..1024)" in errors[0], r.stderr
            assert "Traceback" not in r.stderr
        assert srv.requests == []  # not even the endpoint check: the count is refused first
    assert not (ws / "runs" / "too-many").exists()


# -- SIGTERM --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_stops_a_running_synth_within_seconds_and_the_run_resumes(ws, tmp_path):
    """An endpoint that holds every request until the test releases it, the largest allowed sample count: the run
    starts at once, SIGTERM stops it with the interrupt line and exit 143 while the endpoint still holds its requests
    (it waited for no reply: counted, not timed), and the run is left resumable."""
    run = "sigterm"
    gate = threading.Event()
    with OpenAIServer(reply="<answer>x</answer>", hold=gate) as srv:
        cfg = _config(tmp_path / "cfg.yaml", srv.base_url)
        proc = subprocess.Popen([*CLI, "synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg), "--limit", "1",
                                 "--set", "synth.samples=1024", "--run", run], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 300  # a guard against a hang, not a bound the test checks
            while time.monotonic() < deadline and proc.poll() is None and srv.in_flight == 0:
                time.sleep(0.1)
            # requests in flight (the server holds them): the run is busy, not finished
            assert proc.poll() is None and srv.in_flight > 0, lines
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=300)  # a hang guard
            held = srv.in_flight  # what the endpoint still held when the run had stopped
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            gate.set()
        reader.join(5)
    assert held > 0, "the run waited for its requests' replies before it stopped"
    assert rc == 128 + signal.SIGTERM, (rc, lines[-5:])
    assert any("interrupted; finished work is kept, re-run to resume" in x for x in lines), lines
    assert not any("Traceback" in x for x in lines), lines
    assert not any(x.rstrip().endswith("· done") for x in lines), lines
    run_dir = ws / "runs" / run
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"  # interrupted, not failed
    # resumable: the same run id goes on (a fast endpoint now; two samples are enough to show it)
    with OpenAIServer(reply="<answer>x</answer>") as srv:
        cfg = _config(tmp_path / "cfg2.yaml", srv.base_url)
        again = CliRunner().invoke(app, ["synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg), "--limit", "1",
                                         "--samples", "2", "--run", run, "-q"])
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "finished"


# -- progress of a resumed stage ------------------------------------------------------------------------------------


def test_a_resumed_tasks_rate_counts_only_this_processs_items():
    out = io.StringIO()
    bar = LineProgress("ingest", every=0, stream=out)
    tid = bar.add_task("ingest", total=100, completed=90)  # 90 done by an earlier run
    bar.tasks[tid]["t0"] -= 10.0  # this process started 10 s ago (set on the record, no clock is faked)
    bar.advance(tid, 1)  # ... and has finished one item since
    line = bar.line(bar.tasks[tid])
    assert line.startswith("ingest: 91/100 (91%)"), line
    assert "90 done before" in line, line
    assert " · 0.10/s" in line, line  # 1 item in 10 s, not 91
    assert "ETA 1:30" in line, line  # 9 left at 0.1/s


@pytest.mark.slow
def test_ingest_resume_shows_the_skipped_documents_as_done_before(tmp_path):
    corpus = tmp_path / "corpus"
    r = CliRunner().invoke(app, ["sample-corpus", str(corpus), "--docs", "2", "--seed", "1"])
    assert r.exit_code == 0, r.output
    pdfs = sorted(corpus.glob("*.pdf"))
    first = tmp_path / "first"
    first.mkdir()
    shutil.copy(pdfs[0], first / pdfs[0].name)
    ws = tmp_path / "ws"
    args = ["ingest", "-w", str(ws), "--ocr", "off", "--workers", "1"]
    r = CliRunner().invoke(app, [*args, str(first)])
    assert r.exit_code == 0, r.output
    both = tmp_path / "both"
    both.mkdir()
    for p in pdfs:
        shutil.copy(p, both / p.name)
    r = CliRunner().invoke(app, [*args, str(both)])  # the first document is unchanged: skipped
    assert r.exit_code == 0, r.output
    lines = [x for x in r.stderr.splitlines() if x.startswith("ingest: 2/2")]
    assert lines, r.stderr
    assert "1 done before" in lines[-1], lines[-1]
