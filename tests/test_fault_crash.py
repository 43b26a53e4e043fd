"""Crash and resume through the real CLI: `kill -9` a `vrag-data synth`, `ingest` or `export` process at
random points (seeded), restart it, and compare with an uninterrupted run of the same command.

synth: the final trajectory set has exactly the (task, sample) keys of the uninterrupted run, no duplicate,
the same content, and the server never saw again a request whose response had reached the run's cache
before a kill. ingest: the same documents, pages and page images, and at every kill point each document
row has all its pages (a half-written shard never counts). export: the same shard files with the same rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.roles import model_roles
from tests.support.openai_server import Faults, OpenAIServer
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents, load_pages
from vrag_data.store.shards import read_table
from vrag_data.synth.ledger import read_manifest, read_trajectories

REPO = Path(__file__).resolve().parents[1]
VRAG = [sys.executable, "-m", "vrag_data.cli.main"]
SAMPLES = 3


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}


def _spawn(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen([*VRAG, *map(str, args)], cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _wait_until(proc: subprocess.Popen[str], cond, what: str, timeout: float = 90) -> bool:
    """Poll `cond()`; False if the process ended first (the kill point came too late: the caller moves on)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"no progress towards {what}"
        time.sleep(0.005)
    return True


# ------------------------------------------------------------------------------------------------ synth


def _synth_config(path: Path, base_url: str) -> Path:
    policy = {"endpoints": [{"base_url": base_url, "model": "teacher"}], "backoff_s": 0.01, "backoff_max_s": 0.05,
              "max_retries": 3, "timeout_s": 20, "sampling": {"temperature": 0.0, "max_tokens": 512}}
    # few episodes at once: the run lasts long enough to be killed at several points
    path.write_text(yaml.safe_dump({"roles": model_roles(policy), "synth": {"concurrent_episodes": 4}}))
    return path


def _cached_ids(run_dir: Path) -> set[str]:
    db = sqlite3.connect(f"file:{run_dir / 'requests.sqlite'}?mode=ro", uri=True)
    try:
        return {"rq_" + k[:24] for (k,) in db.execute("SELECT key FROM responses")}
    finally:
        db.close()


def _content(run_dir: Path) -> dict[tuple[str, int], tuple]:
    return {(t.task_id, t.sample): (t.status, t.final_answer, tuple(x.assistant for x in t.turns),
                                    tuple(x.observation.text if x.observation else "" for x in t.turns))
            for t in read_trajectories(run_dir)}


@pytest.mark.soak  # `make test-soak`: minutes of kill -9 and resume; CI runs the ingest one
def test_synth_kill_9_at_random_points_then_resume_equals_an_uninterrupted_run(ws, tmp_path):
    rng = random.Random(9)
    with OpenAIServer(reply=teacher, faults=Faults(latency_s=0.02)) as srv:
        cfg = _synth_config(tmp_path / "cfg.yaml", srv.base_url)
        common = ["synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--samples", SAMPLES, "-q"]
        ref = _spawn(*common, "--run", "fault-ref")
        _, err = ref.communicate(timeout=180)
        assert ref.returncode == 0, err
        total = len(srv.requests)  # requests of a whole run
        srv.clear()

        run_dir = ws / "runs" / "fault-crash"
        # kill points: one during start-up (before any request), then at random request counts, increasing
        points = [0, *sorted(rng.sample(range(total // 8, total * 7 // 8), 2))]
        before: list[tuple[set[str], int]] = []  # (cached ids at the kill, requests seen before it)
        for n in points:
            proc = _spawn(*common, "--run", "fault-crash")
            if n == 0:
                time.sleep(rng.uniform(0.3, 1.0))
                if proc.poll() is None:
                    _kill9(proc)
                continue
            if not _wait_until(proc, lambda n=n: len(srv.requests) >= n, f"{n} requests"):
                pytest.fail(f"run finished before the kill point ({n} of ~{total} requests): {proc.communicate()}")
            _kill9(proc)
            before.append((_cached_ids(run_dir), len(srv.requests)))
            # the ledger is the complete shards: each is a readable parquet file with unique keys
            for p in sorted((run_dir / "trajectories").glob("part-*.parquet")):
                assert pq.read_metadata(p).num_rows > 0
        proc = _spawn(*common, "--run", "fault-crash")
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        seen = srv.request_ids()

    t = read_table(str(run_dir / "trajectories"))
    keys = list(zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "a (task, sample) was written twice"
    assert _content(run_dir) == _content(ws / "runs" / "fault-ref")  # same keys, same episodes
    assert read_manifest(run_dir).status == "finished"
    # no recorded response was requested again after a kill
    for i, (cached, upto) in enumerate(before):
        later = set(seen[upto:])
        assert cached, f"kill {i + 1} came before any response was cached"
        assert not cached & later, f"kill {i + 1}: {len(cached & later)} cached request(s) were sent again"
    # work redone is bounded by what was in flight (4 episodes x 1 request) at each kill
    assert len(seen) - total <= len(before) * 4 + 4


# ------------------------------------------------------------------------------------------------ ingest


def _ingest_inputs(folder: Path, n_docs: int = 4, pages: int = 20) -> Path:
    import pymupdf

    folder.mkdir()
    for d in range(n_docs):
        doc = pymupdf.open()
        for i in range(pages):
            doc.new_page(width=612, height=792).insert_text((72, 72 + 10 * (i % 40)), f"Document {d} page {i + 1}: revenue {d * 100 + i}.")
        doc.save(folder / f"doc{d}.pdf")
        doc.close()
    return folder


def _corpus_state(root: Path) -> tuple:
    ws = Workspace(str(root))
    docs = sorted((d.doc_id, d.stem, d.n_pages) for d in load_documents(ws))
    pages = [(p.page_id, p.width, p.height, p.text) for p in load_pages(ws)]
    images = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "pages").glob("*.jpg")}
    return docs, sorted(pages), len(pages), images


@pytest.mark.slow
def test_ingest_kill_9_then_resume_equals_an_uninterrupted_ingest(tmp_path):
    rng = random.Random(19)
    inputs = _ingest_inputs(tmp_path / "in")
    args = ["--layout", "off", "--ocr", "off", "--workers", "1", "-q"]
    ref = _spawn("ingest", "-w", tmp_path / "ref", inputs, *args)
    _, err = ref.communicate(timeout=180)
    assert ref.returncode == 0, err
    want = _corpus_state(tmp_path / "ref")
    n_images = len(want[3])

    root = tmp_path / "crash"
    for target in sorted(rng.sample(range(5, n_images - 5), 2)):
        proc = _spawn("ingest", "-w", root, inputs, *args)
        pages_dir = root / "pages"
        if not _wait_until(proc, lambda t=target: pages_dir.is_dir() and len(os.listdir(pages_dir)) >= t, f"{target} page images"):
            pytest.fail("ingest finished before the kill point")
        _kill9(proc)
        # whatever was committed is whole: every document row has all of its pages
        ws = Workspace(str(root))
        by_doc: dict[str, int] = {}
        for p in load_pages(ws):
            by_doc[p.stem] = by_doc.get(p.stem, 0) + 1
        for d in load_documents(ws):
            assert by_doc.get(d.stem) == d.n_pages, f"{d.stem}: document row without all its pages"
    proc = _spawn("ingest", "-w", root, inputs, *args)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    got = _corpus_state(root)
    assert got[:3] == want[:3]
    assert set(got[3]) == set(want[3])  # page images: same names (JPEG bytes may differ only if re-rendered)
    assert not [p for p in (root / "pages").iterdir() if not p.name.endswith(".jpg") and not p.name.startswith(".tmp-")]


# ------------------------------------------------------------------------------------------------ export


def _export_state(out: Path) -> dict[str, object]:
    """Every data file under `out` (hidden temp folders excluded) -> its rows (parquet) or text, with the
    output folder's own path replaced (configs and verl rows name absolute image paths)."""
    state: dict[str, object] = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if not p.is_file() or any(part.startswith(".") for part in rel.parts) or str(rel) == "summary.json":
            continue  # summary.json: its run statistics differ by design (images reused, not re-written)
        if p.suffix == ".parquet":
            text = json.dumps(pq.read_table(p).to_pylist(), default=repr, sort_keys=True)
        elif p.suffix in (".json", ".jsonl", ".md", ".yaml", ".txt"):
            text = p.read_text()
        else:
            state[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
            continue
        # the exporter's code version hashes the working tree, which may change between the two exports
        # and `datasets` stamps a random fingerprint on every save
        text = re.sub(r"(\d+\.\d+\.\d+)\+[0-9a-f]{6,}", r"\1+<code>", text.replace(str(out), "<out>"))
        text = re.sub(r'"_fingerprint": "[0-9a-f]+"', "", text)
        state[str(rel)] = hashlib.sha256(text.encode()).hexdigest()
    return state


def _n_shards(out: Path) -> int:
    """Finished shards so far (os.walk: folders the exporter replaces while we look are skipped, not errors)."""
    return sum(1 for d, dirs, files in os.walk(out) if ".tmp" not in Path(d).parts
               for f in files if f.endswith((".parquet", ".jsonl")))


@pytest.mark.slow
@pytest.mark.soak
def test_export_kill_9_then_rerun_equals_an_uninterrupted_export(ws, tmp_path):
    rng = random.Random(29)
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--samples", 3, "--run", "fault-export", "-q")
    args = ["export", "-w", ws, "--run", "fault-export", "--shard-size", 4]
    ref = _spawn(*args, "--out", tmp_path / "ref")
    _, err = ref.communicate(timeout=180)
    assert ref.returncode == 0, err
    want = _export_state(tmp_path / "ref")
    n_shards = sum(1 for k in want if k.endswith((".parquet", ".jsonl", ".json")))
    assert n_shards > 10, want.keys()

    out = tmp_path / "crash"
    kills = 0
    for target in sorted(rng.sample(range(1, n_shards // 2), 2)):
        proc = _spawn(*args, "--out", out)
        if not _wait_until(proc, lambda t=target: _n_shards(out) >= t, f"{target} shards"):
            break  # finished before this kill point: the rerun below still has to match
        _kill9(proc)
        kills += 1
        # no half-written file under a final name: every parquet shard outside .tmp reads whole
        for p in out.rglob("*.parquet"):
            if ".tmp" not in p.relative_to(out).parts[0]:
                pq.read_metadata(p)
    assert kills, "the export finished before it could be killed"
    proc = _spawn(*args, "--out", out)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    got = _export_state(out)
    assert sorted(got) == sorted(want), set(got) ^ set(want)
    for k in want:
        assert got[k] == want[k], f"{k} differs after kill -9 and re-run"
    got_s, want_s = (json.loads((d / "summary.json").read_text()) for d in (out, tmp_path / "ref"))
    for key in ("n_trajectories", "n_kept", "counts", "skipped"):
        assert got_s[key] == want_s[key], key
