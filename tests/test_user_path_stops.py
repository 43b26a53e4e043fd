"""The user's path through the headline commands, as a user sees it: stops on signals, progress by time, errors that
keep their cause. Every test runs the real `vrag-data` in a subprocess (signals, pipes and process trees are real)."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.support.openai_server import Faults, OpenAIServer

EXE = str(Path(sys.executable).parent / "vrag-data")
STOP_S = 5.0  # the bound: any stage stops within 5 s of a signal
PROGRESS_S = 10.0  # and a long stage prints a line at least every 10 s


class Cli:
    """`vrag-data ...` with stderr read line by line on a thread (so a test can wait for a line with a deadline)."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "COLUMNS": "200"}
        self.proc = subprocess.Popen([EXE, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_line(self, pred, timeout: float) -> tuple[str, float]:
        """The first line matching `pred` and when it came; fails naming what was seen."""
        t0 = time.monotonic()
        while (left := timeout - (time.monotonic() - t0)) > 0:
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if pred(line):
                return line, time.monotonic()
        raise AssertionError(f"no matching line within {timeout:.0f}s; stderr so far: {self.lines[-15:]}")

    def finish(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        while (line := self._q.get(timeout=5)) is not None:
            self.lines.append(line)
        return rc

    def kill(self) -> None:
        for p in self.tree():
            p.kill()
        self.proc.kill()
        self.proc.wait(10)

    def tree(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []


def _pdfs(tmp: Path, shared_root: Path) -> Path:
    """A few real PDFs (the shared corpus's largest) or, without it, a generated sample corpus."""
    docs = shared_root / "docs"
    out = tmp / "in"
    out.mkdir()
    if docs.is_dir():
        for p in sorted(docs.glob("*.pdf"), key=lambda p: -p.stat().st_size)[:4]:
            shutil.copy(p, out / p.name)
        return out
    from vrag_data.sample import make_sample_corpus

    made = make_sample_corpus(tmp / "sample", docs=24, seed=0)
    for p in made.paths:
        shutil.copy(p, out / Path(p).name)
    return out


def _busy_ingest(tmp: Path) -> tuple[Cli, list[psutil.Process]]:
    """An ingest on 2 workers, once it said it started and its workers run."""
    from tests.conftest import SHARED_CORPUS

    cli = Cli("ingest", _pdfs(tmp, SHARED_CORPUS), "-w", tmp / "ws", "--workers", "2", "--ocr", "off")
    cli.wait_line(lambda x: x.startswith("ingest: ") and "worker(s)" in x, 120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [p for p in cli.tree() if "multiprocessing" in " ".join(p.cmdline())]
        if len(workers) >= 2:
            time.sleep(1.0)  # inside their documents
            return cli, workers
        time.sleep(0.2)
    cli.kill()
    raise AssertionError(f"the ingest workers did not start; stderr: {cli.lines}")


def _gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_an_ingest_within_5s_without_done_or_orphans(tmp_path, sig):
    cli, workers = _busy_ingest(tmp_path)
    try:
        cli.proc.send_signal(sig)
        t0 = time.monotonic()
        rc = cli.finish(timeout=STOP_S + 5)
        took = time.monotonic() - t0
    finally:
        if cli.proc.poll() is None:
            cli.kill()
    assert took <= STOP_S, f"stopped after {took:.1f}s: {cli.lines[-5:]}"
    assert rc != 0
    assert not any(x.rstrip().endswith("done") for x in cli.lines), cli.lines
    assert any("interrupted" in x for x in cli.lines), cli.lines
    assert not _gone(workers, 2.0), "worker processes outlived the stopped ingest"


def test_a_second_signal_stops_at_once(tmp_path):
    cli, workers = _busy_ingest(tmp_path)
    try:
        cli.proc.send_signal(signal.SIGINT)
        cli.proc.send_signal(signal.SIGINT)
        rc = cli.finish(timeout=STOP_S)
    finally:
        if cli.proc.poll() is None:
            cli.kill()
    assert rc != 0
    assert not _gone(workers, 3.0), "worker processes outlived their parent"


def test_kill_9_of_the_parent_leaves_no_worker(tmp_path):
    cli, workers = _busy_ingest(tmp_path)
    cli.proc.kill()  # SIGKILL: the parent cannot clean up; its workers must notice on their own
    cli.proc.wait(10)
    alive = _gone(workers, STOP_S)
    for p in alive:
        p.kill()
    assert not alive, f"{len(alive)} worker(s) kept running after kill -9 of the ingest"


@pytest.fixture(scope="module")
def synth_ws(tmp_path_factory) -> Path:
    from tests.support.synth_workspace import sample_workspace

    return sample_workspace(tmp_path_factory.getbasetemp())


def test_a_slow_endpoint_shows_progress_within_10s_and_ctrl_c_prints_no_done(synth_ws):
    with OpenAIServer(reply="<search>revenue</search>", faults=Faults(latency_s=60)) as srv:
        cli = Cli("synth", "-w", synth_ws, "--recipe", "visor", "--policy-url", srv.base_url, "--policy-model", "teacher", "--set", "roles.judge.kind=rules",
                  "--limit", "2", "--run", "slow-endpoint")
        try:
            _, t0 = cli.wait_line(lambda x: "rolling out" in x, 120)
            line, t1 = cli.wait_line(lambda x: x.startswith("synth: "), PROGRESS_S + 5)
            assert t1 - t0 <= PROGRESS_S + 2, f"first progress line after {t1 - t0:.1f}s"
            assert "0/2" in line and "/s" in line and "elapsed" in line
            cli.proc.send_signal(signal.SIGINT)
            rc = cli.finish(timeout=STOP_S + 5)
        finally:
            if cli.proc.poll() is None:
                cli.kill()
    assert rc != 0
    assert not any(x.rstrip().endswith("· done") for x in cli.lines), cli.lines


def test_an_endpoint_error_keeps_its_cause_and_url(synth_ws):
    with OpenAIServer(reply="<answer>x</answer>", api_key="right-key") as srv:
        r = subprocess.run([EXE, "synth", "-w", str(synth_ws), "--recipe", "visor", "--policy-url", srv.base_url,
                            "--policy-model", "teacher", "--set", "roles.judge.kind=rules", "--limit", "1", "--run", "unauthorised"],
                           capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "300"})
    out = " ".join(r.stderr.split())
    assert r.returncode != 0
    assert srv.base_url in out and "401" in out, out[-1500:]
