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
STOP_S = 5.0  # the bound: any stage stops within 5 s of a signal (the soak tests check it; the others count)
HANG_S = 120.0  # a guard against a hang on a loaded machine, not a bound a test checks
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
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        workers = [p for p in cli.tree() if "multiprocessing" in " ".join(p.cmdline())]
        # inside their documents (a PDF open): set up, so past the start-up a loaded machine may stretch
        if sum(_in_a_document(p) for p in workers) >= 2:
            return cli, workers
        time.sleep(0.2)
    cli.kill()
    raise AssertionError(f"the ingest workers did not start; stderr: {cli.lines}")


def _in_a_document(p: psutil.Process) -> bool:
    try:
        return any(f.path.endswith(".pdf") for f in p.open_files())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _ingested(tmp: Path) -> int:
    """Documents the ingest of `_busy_ingest` finished (one parquet file each under corpus/documents/)."""
    return len(list((tmp / "ws" / "corpus" / "documents").glob("*.parquet")))


def _gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_an_ingest_within_5s_without_done_or_orphans(tmp_path, sig):
    """The signal stops the ingest inside its documents: it exits before it has ingested them all (counted, not
    timed: a loaded machine stretches both), says it was interrupted, never "done", and leaves no worker."""
    cli, workers = _busy_ingest(tmp_path)
    try:
        cli.proc.send_signal(sig)
        rc = cli.finish(timeout=HANG_S)
    finally:
        if cli.proc.poll() is None:
            cli.kill()
    assert _ingested(tmp_path) < len(list((tmp_path / "in").iterdir())), f"it ingested everything first: {cli.lines[-5:]}"
    assert rc != 0
    assert not any(x.rstrip().endswith("done") for x in cli.lines), cli.lines
    assert any("interrupted" in x for x in cli.lines), cli.lines
    assert not _gone(workers, 2.0), "worker processes outlived the stopped ingest"


@pytest.mark.slow
def test_a_second_signal_stops_at_once(tmp_path):
    cli, workers = _busy_ingest(tmp_path)
    try:
        cli.proc.send_signal(signal.SIGINT)
        cli.proc.send_signal(signal.SIGINT)
        rc = cli.finish(timeout=HANG_S)
    finally:
        if cli.proc.poll() is None:
            cli.kill()
    assert rc != 0 and _ingested(tmp_path) < len(list((tmp_path / "in").iterdir()))
    assert not _gone(workers, HANG_S), "worker processes outlived their parent"


@pytest.mark.slow
def test_kill_9_of_the_parent_leaves_no_worker(tmp_path):
    cli, workers = _busy_ingest(tmp_path)
    cli.proc.kill()  # SIGKILL: the parent cannot clean up; its workers must notice on their own
    cli.proc.wait(10)
    alive = _gone(workers, HANG_S)
    for p in alive:
        p.kill()
    assert not alive, f"{len(alive)} worker(s) kept running after kill -9 of the ingest"


@pytest.fixture(scope="module")
def synth_ws(tmp_path_factory) -> Path:
    from tests.support.synth_workspace import sample_workspace

    return sample_workspace(tmp_path_factory.getbasetemp())


@pytest.mark.soak
@pytest.mark.slow
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


@pytest.mark.slow
def test_an_endpoint_error_keeps_its_cause_and_url(synth_ws):
    with OpenAIServer(reply="<answer>x</answer>", api_key="right-key") as srv:
        r = subprocess.run([EXE, "synth", "-w", str(synth_ws), "--recipe", "visor", "--policy-url", srv.base_url,
                            "--policy-model", "teacher", "--set", "roles.judge.kind=rules", "--limit", "1", "--run", "unauthorised"],
                           capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "300"})
    out = " ".join(r.stderr.split())
    assert r.returncode != 0
    assert srv.base_url in out and "401" in out, out[-1500:]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "300"})


def _errors(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [x for x in r.stderr.splitlines() if x.startswith("error:")]


@pytest.fixture(scope="module")
def two_runs(synth_ws) -> tuple[Path, str, str]:
    for run in ("user-a", "user-b"):
        r = _cli("synth", "-w", synth_ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "3", "--run", run, "-q")
        assert r.returncode == 0, r.stderr
    return synth_ws, "user-a", "user-b"


@pytest.mark.soak
def test_a_second_run_exported_into_the_same_out_is_refused_unless_overwrite(two_runs, tmp_path):
    ws, a, b = two_runs
    out = tmp_path / "export"
    assert _cli("export", "-w", ws, "--run", a, "--out", out).returncode == 0
    assert (out / "verl").is_dir() and (out / "llamafactory").is_dir()
    r = _cli("export", "-w", ws, "--run", b, "--out", out)
    assert r.returncode == 2 and len(_errors(r)) == 1, r.stderr
    assert f"run {a}" in r.stderr and "--overwrite" in r.stderr
    assert _cli("export", "-w", ws, "--run", a, "--out", out).returncode == 0  # the same run again: fine
    r = _cli("export", "-w", ws, "--run", b, "--out", out, "--format", "hf", "--overwrite")
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads((out / "summary.json").read_text())["run_id"] == b
    assert not (out / "verl").exists() and not (out / "llamafactory").exists()  # nothing of run A is left


def test_rl_validation_rows_are_held_out_by_task(tmp_path):
    import json

    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).parent))
    from export_fixtures import build_workspace, run_recipes

    from vrag_data.config import ExportConfig
    from vrag_data.export import export_run

    ws = build_workspace(tmp_path / "ws")
    export_run(ws, "r1", formats=["verl", "easyr1"], out_dir=tmp_path / "o", config=ExportConfig(val_share=0.34),
               recipes=run_recipes())
    verl = {split: {r["task_id"] for p in (tmp_path / "o" / "verl").glob(f"{split}-*.parquet")
                    for r in pq.read_table(p).column("extra_info").to_pylist()} for split in ("train", "val")}
    easy = {split: {json.loads(x)["task_id"] for p in (tmp_path / "o" / "easyr1" / split).glob("*.jsonl")
                    for x in p.read_text().splitlines()} for split in ("train", "val")}
    for got in (verl, easy):
        assert got["train"] and got["val"] and not got["train"] & got["val"]
    assert verl["val"] == easy["val"]  # one held-out set for every RL format
    import yaml

    cfg = yaml.safe_load((tmp_path / "o" / "verl" / "config.yaml").read_text())["data"]
    assert not set(cfg["train_files"]) & set(cfg["val_files"])
    assert yaml.safe_load((tmp_path / "o" / "easyr1" / "data_config.yaml").read_text())["data"]["val_files"] == "easyr1/val"


@pytest.mark.slow
def test_the_filter_names_the_largest_drop_and_its_setting(synth_ws):
    r = _cli("synth", "-w", synth_ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "4", "--samples", "2",
             "--run", "user-balance", "-q")
    assert r.returncode == 0, r.stderr
    r = _cli("filter", "-w", synth_ws, "--run", "user-balance", "--set", "filters.options.vrag_rl.balance.max_per_bucket=1")
    assert r.returncode == 0, r.stderr
    drops = [x for x in r.stderr.splitlines() if x.startswith("dropped:")]
    assert drops and drops[0].startswith("dropped: balance dropped"), r.stderr
    assert "filters.options.vrag_rl.balance.max_per_bucket=1" in drops[0]


@pytest.mark.soak
@pytest.mark.slow
def test_set_overrides_a_config_key_and_a_misspelled_key_fails_in_one_line(synth_ws, tmp_path):
    r = _cli("synth", "-w", synth_ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "1", "--run", "user-set",
             "--set", "synth.samples=2", "-q")
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    rows = sum(pq.read_metadata(p).num_rows for p in (synth_ws / "runs" / "user-set" / "trajectories").glob("*.parquet"))
    assert rows == 2  # one task, two samples: the override took effect
    r = _cli("synth", "-w", synth_ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "1", "--run", "user-set2",
             "--set", "synth.sampels=2")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "synth.sampels" in r.stderr, r.stderr
    # `vrag-data run` (the flow) takes the same overrides, checked before any server starts or folder is made
    ws = tmp_path / "run-ws"
    r = _cli("run", "--config", "configs/demo.yaml", "-w", ws, "--set", "synth.recipes=[visor]", "--set", "synth.sampels=2")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "synth.sampels" in r.stderr and not ws.exists(), r.stderr
    r = _cli("run", "--config", "configs/demo.yaml", "-w", ws, "--set", "synth.recipes=[visr]")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "visr" in r.stderr and not ws.exists(), r.stderr
    r = _cli("train", "rl", "--config", "configs/train/tiny-rl.yaml", "--set", "rl.estimator=ppo", "-o", tmp_path / "t")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "rl.estimator" in r.stderr, r.stderr
    r = _cli("train", "sft", "--config", "configs/train/tiny-sft.yaml", "--set", "sft.max_stepz=1", "-o", tmp_path / "t")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "sft.max_stepz" in r.stderr, r.stderr


def test_make_setup_shows_what_it_installs_and_pip_progress():
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(["make", "-n", "-B", "setup"], cwd=root, capture_output=True, text=True, timeout=60)
    install = [x for x in r.stdout.splitlines() if "pip install" in x]
    assert install and "--quiet" not in install[0] and "--progress-bar on" in install[0], r.stdout
    assert any(x.startswith("echo") and "takes minutes" in x for x in r.stdout.splitlines()), r.stdout
