"""Fault injection at a larger scale than the tests: how many faults, whether every run survived, how many
records were lost (must be 0), plus ingest memory on hostile documents and the search server under load.

`.venv/bin/python bench/bench_faults.py [--kills 8] [--samples 4] [--search 10000] [--only hostile,search-load]`

Scenarios (all on 127.0.0.1, the real CLI in subprocesses):
  synth-kill   `vrag-data synth` (vrag_rl, scripted teacher, 20 ms latency) killed with SIGKILL at random
               request counts, then resumed; lost = keys of an uninterrupted run missing at the end,
               dup = keys written twice, repaid = cached requests the server saw again after a kill.
  ingest-kill  `vrag-data ingest` of 8 x 40-page PDFs killed at random page counts, then resumed.
  export-kill  `vrag-data export` (4 formats, shard size 4) killed at random shard counts, then re-run.
  flaky        synth against 20% 500 / 5% 429 / 3% drop / 3% truncated / 3% empty / 5% 1 s spikes
               (client timeout 0.5 s, max_retries 3): episodes without a status = lost.
  hostile      ingest of the hostile corpus (tests/support/hostile.py, 5,000-page PDF included): peak RSS.
  search-load  N requests (10% invalid), 64 in flight, against `vrag-data serve-search`.
  round2       markup in file names and page text (teacher requests, SFT export), a server echoing the API key,
               a non-UTF-8 name and symlinks out of the folder, two exports into one folder, a teacher reply
               over the 8 MiB cap, an endpoint that always fails (exit codes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import yaml  # noqa: E402

from tests.support.hostile import hostile_corpus  # noqa: E402
from tests.support.openai_server import Faults, OpenAIServer  # noqa: E402
from tests.support.roles import model_roles  # noqa: E402
from tests.support.scripted_teacher import teacher  # noqa: E402
from tests.support.synth_workspace import cli, sample_workspace  # noqa: E402
from tests.test_fault_crash import (  # noqa: E402
    _cached_ids,
    _content,
    _corpus_state,
    _export_state,
    _ingest_inputs,
    _kill9,
    _n_shards,
    _spawn,
    _synth_config,
    _wait_until,
)
from tests.test_fault_hostile import _hwm_mb, _ingest_subprocess  # noqa: E402
from tests.test_fault_search import TOKEN, _free_port, _load  # noqa: E402
from vrag_data.store.shards import read_table  # noqa: E402
from vrag_data.synth.ledger import read_trajectories  # noqa: E402

ROWS: list[tuple[str, str, int, str, int, str]] = []  # scenario, faults, injected, survived, lost, notes


def synth_kill(ws: Path, tmp: Path, kills: int, samples: int, rng: random.Random) -> None:
    with OpenAIServer(reply=teacher, faults=Faults(latency_s=0.02)) as srv:
        cfg = _synth_config(tmp / "synth.yaml", srv.base_url)
        common = ["synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--samples", samples, "-q"]
        ref = _spawn(*common, "--run", "bench-ref")
        ref.communicate()
        total = len(srv.requests)
        srv.clear()
        run_dir = ws / "runs" / "bench-crash"
        before: list[tuple[set[str], int]] = []
        for n in sorted(rng.sample(range(total // 20, total * 19 // 20), kills)):
            proc = _spawn(*common, "--run", "bench-crash")
            if not _wait_until(proc, lambda n=n: len(srv.requests) >= n, "requests", timeout=600):
                continue
            _kill9(proc)
            before.append((_cached_ids(run_dir), len(srv.requests)))
        proc = _spawn(*common, "--run", "bench-crash")
        proc.communicate()
        seen = srv.request_ids()
    want, got = _content(ws / "runs" / "bench-ref"), _content(run_dir)
    t = read_table(str(run_dir / "trajectories"))
    keys = list(zip(t.column("task_id").to_pylist(), t.column("sample").to_pylist(), strict=True))
    repaid = sum(len(c & set(seen[upto:])) for c, upto in before)
    lost = len(set(want) - set(got))
    ROWS.append(("synth-kill", "SIGKILL mid-run", len(before), f"{proc.returncode == 0}", lost,
                 f"{len(want)} episodes, {total} requests/run; dup {len(keys) - len(set(keys))}, content equal "
                 f"{want == got}, cached requests re-sent {repaid}, extra requests {len(seen) - total}"))


def ingest_kill(tmp: Path, kills: int, rng: random.Random) -> None:
    inputs = _ingest_inputs(tmp / "ingest-in", n_docs=8, pages=40)
    args = ["--layout", "off", "--ocr", "off", "--workers", "1", "-q"]
    _spawn("ingest", "-w", tmp / "ingest-ref", inputs, *args).communicate()
    want = _corpus_state(tmp / "ingest-ref")
    root, done = tmp / "ingest-crash", 0
    for target in sorted(rng.sample(range(5, len(want[3]) - 5), kills)):
        proc = _spawn("ingest", "-w", root, inputs, *args)
        if _wait_until(proc, lambda t=target: (root / "pages").is_dir() and len(os.listdir(root / "pages")) >= t, "pages", 600):
            _kill9(proc)
            done += 1
    proc = _spawn("ingest", "-w", root, inputs, *args)
    proc.communicate()
    got = _corpus_state(root)
    lost = len(set(want[1]) - set(got[1]))
    ROWS.append(("ingest-kill", "SIGKILL mid-ingest", done, f"{proc.returncode == 0}", lost,
                 f"{len(want[1])} pages; documents equal {got[0] == want[0]}, page rows equal {got[1] == want[1]}"))


def export_kill(ws: Path, tmp: Path, kills: int, rng: random.Random) -> None:
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--samples", 4, "--run", "bench-export", "-q")
    args = ["export", "-w", ws, "--run", "bench-export", "--shard-size", 4]
    _spawn(*args, "--out", tmp / "export-ref").communicate()
    want = _export_state(tmp / "export-ref")
    n = sum(1 for k in want if k.endswith((".parquet", ".jsonl")))
    out, done = tmp / "export-crash", 0
    for target in sorted(rng.sample(range(1, max(2, n - 1)), min(kills, n - 2))):
        proc = _spawn(*args, "--out", out)
        if _wait_until(proc, lambda t=target: _n_shards(out) >= t, "shards", 600):
            _kill9(proc)
            done += 1
    proc = _spawn(*args, "--out", out)
    proc.communicate()
    got = _export_state(out)
    lost = len([k for k in want if got.get(k) != want[k]])
    ROWS.append(("export-kill", "SIGKILL mid-export", done, f"{proc.returncode == 0}", lost,
                 f"{n} shards; differing or missing files {lost}"))


def flaky(ws: Path, tmp: Path, samples: int) -> None:
    faults = Faults(p500=0.20, p429=0.05, p_drop=0.03, p_truncate=0.03, p_empty=0.03, spike_p=0.05, spike_s=1.0)
    with OpenAIServer(reply=teacher, faults=faults, seed=11) as srv:
        policy = {"endpoints": [{"base_url": srv.base_url, "model": "teacher"}], "max_retries": 3, "backoff_s": 0.01,
                  "backoff_max_s": 0.05, "timeout_s": 0.5, "sampling": {"temperature": 0.0}}
        cfg = tmp / "flaky.yaml"
        cfg.write_text(yaml.safe_dump({"roles": model_roles(policy), "synth": {"concurrent_episodes": 16}}))
        ok = True
        trajs = []
        for recipe in ("vrag_rl", "visor", "mmdoc_r1"):
            try:
                cli("synth", "-w", ws, "--recipe", recipe, "--config", cfg, "--samples", samples, "--run", f"bench-flaky-{recipe}", "-q")
            except AssertionError:
                ok = False
            trajs += read_trajectories(ws / "runs" / f"bench-flaky-{recipe}")
        seen = srv.requests
    out = Counter(r.outcome for r in seen)
    injected = sum(v for k, v in out.items() if k != "ok")
    per_id = Counter(r.request_id for r in seen)
    status = Counter(t.status for t in trajs)
    lost = sum(1 for t in trajs if not t.status or (t.status != "answered" and not t.reason))
    ROWS.append(("flaky", "500/429/drop/truncate/empty/spike", injected, str(ok), lost,
                 f"{len(seen)} requests ({dict(out)}); max attempts per request {max(per_id.values())}; "
                 f"episodes {dict(status)}"))


def hostile(tmp: Path) -> None:
    made = hostile_corpus(tmp / "hostile")
    t0 = time.perf_counter()
    code, rss = _ingest_subprocess(tmp / "hostile", tmp / "hostile-ws", tmp / "hostile.log")
    wall = time.perf_counter() - t0
    ROWS.append(("hostile", "13 hostile/ordinary files", len(made) - 2, str(code == 0), 0,
                 f"peak RSS {rss:.0f} MB, {wall:.1f} s wall (5,000-page PDF included)"))


def search_load(ws: Path, n: int) -> None:
    port = _free_port()
    env = {**os.environ, "VRAG_BENCH_TOKEN": TOKEN}  # the token the load generator sends
    proc = subprocess.Popen([sys.executable, "-m", "vrag_data.cli.main", "serve-search", "-w", str(ws), "--port", str(port),
                             "--token-env", "VRAG_BENCH_TOKEN"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        t0 = time.perf_counter()
        statuses, lat, _ = asyncio.run(_load(url, n, 64))
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait()
    lat.sort()
    ok = statuses.get(200, 0) + statuses.get(422, 0) == n
    ROWS.append(("search-load", "10% invalid requests", n // 10, str(ok), n - sum(statuses.values()),
                 f"{n} requests, 64 in flight: {dict(statuses)}, {n / wall:.0f} req/s, p50 {1000 * lat[len(lat) // 2]:.0f} ms, "
                 f"p99 {1000 * lat[int(len(lat) * 0.99)]:.0f} ms, max {1000 * lat[-1]:.0f} ms"))


def round2(tmp: Path, ws: Path) -> None:
    """The second round of hostile input and faults: each case once, with what was injected and what survived."""
    import json
    import shutil
    import threading
    from http.server import ThreadingHTTPServer

    import fitz

    from tests.test_fault_echoed_key import KEY, _Echo
    from tests.test_fault_hostile import RAW, _echoing_teacher, _injection_workspace, _user_texts

    # markup in file names and page text -> teacher requests and the SFT export
    inj = tmp / "inj"
    inj.mkdir()
    iws = _injection_workspace(inj)
    with OpenAIServer(reply=_echoing_teacher) as srv:
        cfg = inj / "cfg.yaml"
        # the offline student for UniDoc-RL's difficulty filters (synth checks it before any episode)
        cfg.write_text(yaml.safe_dump({"roles": {**model_roles({"endpoints": [{"base_url": srv.base_url, "model": "teacher"}],
                                                                "max_retries": 1}), "student": {"kind": "extractive"}}}))
        for recipe in ("mmdoc_r1", "unidoc_rl", "visor"):
            cli("synth", "-w", iws, "--recipe", recipe, "--config", cfg, "--run", f"inj-{recipe}", "-q")
        texts = [t for r in srv.requests if r.body for t in _user_texts(r.body)]
        n_req = len(srv.requests)
    raw_hits = sum(1 for t in texts if any(raw in t for raw in RAW))
    export_hits, records = 0, 0
    for recipe in ("mmdoc_r1", "unidoc_rl", "visor"):
        out = inj / f"export-{recipe}"
        cli("export", "-w", iws, "--run", f"inj-{recipe}", "--format", "llamafactory", "--out", out)
        for f in out.rglob("part-*.json"):
            rows = json.loads(f.read_text())
            records += len(rows)
            export_hits += sum(1 for r in rows if any(raw in json.dumps(r, ensure_ascii=False) for raw in RAW))
    ROWS.append(("markup in file names and text", "file name, text layer, OCR, outline, caption, page reader", len(RAW),
                 str(raw_hits == 0 and export_hits == 0), raw_hits + export_hits,
                 f"{n_req} teacher requests ({len(texts)} user texts), {records} SFT records: markup reached "
                 f"{raw_hits} requests and {export_hits} records"))

    # a server that echoes the API key in its 401 body
    kws = tmp / "echo-ws"
    shutil.copytree(ws, kws, ignore=shutil.ignore_patterns("runs"))
    echo = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    os.environ["ECHO_KEY"] = KEY
    try:
        cfg = tmp / "echo.yaml"
        url = f"http://127.0.0.1:{echo.server_address[1]}/v1"
        cfg.write_text(yaml.safe_dump({"roles": model_roles({"endpoints": [{"base_url": url, "model": "teacher",
                                                                            "api_key_env": "ECHO_KEY"}], "max_retries": 0})}))
        r = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "synth", "-w", str(kws), "--recipe", "vrag_rl",
                            "--config", str(cfg), "--limit", "4", "--run", "echo", "-q"], capture_output=True, text=True)
        rep = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "report", "-w", str(kws)], capture_output=True, text=True)
    finally:
        echo.shutdown()
        os.environ.pop("ECHO_KEY", None)
    files = [p for p in kws.rglob("*") if p.is_file()]
    hits = [p for p in files if KEY.encode() in p.read_bytes()] + [x for x in (r.stdout + r.stderr, rep.stdout + rep.stderr) if KEY in x]
    ROWS.append(("API key echoed by the server", "401 bodies carrying the key", 4, str(r.returncode == 3 and not hits), len(hits),
                 f"synth exit {r.returncode} (no episode finished), report exit {rep.returncode}; {len(files)} files "
                 f"searched (run, request cache and log, report.duckdb, report.html) and both outputs: {len(hits)} hits"))

    # a non-UTF-8 file name and symlinks out of the input folder, in one batch with a good file
    folder, outside = tmp / "names", tmp / "outside"
    folder.mkdir()
    outside.mkdir()
    doc = fitz.open()
    doc.new_page().insert_text((72, 72), "revenue 42")
    doc.save(folder / "good.pdf")
    shutil.copy(folder / "good.pdf", outside / "secret.pdf")
    shutil.copy(folder / "good.pdf", os.path.join(str(folder), os.fsdecode(b"bad\xff\xfename.pdf")))
    os.symlink(outside / "secret.pdf", folder / "link.pdf")
    os.symlink("/etc/passwd", folder / "passwd.pdf")
    r = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "ingest", str(folder), "-w", str(tmp / "names-ws"),
                        "--layout", "off", "--ocr", "off", "-q"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
    errs = read_table(str(tmp / "names-ws" / "corpus" / "errors.parquet")).to_pylist()
    docs = read_table(str(tmp / "names-ws" / "corpus" / "documents")).to_pylist()
    reasons = Counter(("utf8" if "UTF-8" in e["reason"] else "symlink" if "symlink" in e["reason"] else e["stage"]) for e in errs)
    ROWS.append(("non-UTF-8 name + symlinks out", "1 bad name, 2 links out (a PDF, /etc/passwd)", 3,
                 str(len(docs) == 1 and reasons.get("utf8") == 1 and reasons.get("symlink", 0) == 2), 0,
                 f"ingest exit {r.returncode}; documents {[d['stem'] for d in docs]}; error/notice rows {dict(reasons)}"))

    # two exports into one folder at once
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "40", "--run", "lock", "-q")
    out = tmp / "one-folder"
    procs = [subprocess.Popen([sys.executable, "-m", "vrag_data.cli.main", "export", "-w", str(ws), "--run", "lock", "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "300"})
             for _ in range(2)]
    outs = [(p.wait(), p.stdout.read()) for p in procs]
    codes = sorted(c for c, _ in outs)
    second = next((o for c, o in outs if c != 0), "")
    line = next((x for x in second.splitlines() if x.startswith("error:")), "")
    ROWS.append(("two exports into one folder", "concurrent `vrag-data export --out` of one run", 1,
                 str(codes[0] == 0 and (codes[1] == 0 or bool(line))), 0,
                 f"exit codes {codes}; the second: {line or 'waited and finished'}; tracebacks: "
                 f"{sum('Traceback' in o for _, o in outs)}"))

    # a teacher reply over the cap, and an endpoint that always fails
    big = "<answer>" + "x" * (12 << 20) + "</answer>"
    for label, kw in (("reply over the 8 MiB cap", {"reply": [big]}), ("endpoint always HTTP 500", {"faults": Faults(p500=1.0)})):
        with OpenAIServer(**kw) as srv:
            cfg = tmp / "one.yaml"
            cfg.write_text(yaml.safe_dump({"roles": {"policy": {"endpoints": [{"base_url": srv.base_url, "model": "teacher"}],
                                                                "max_retries": 1}}}))
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "vrag_data.cli.main", "synth", "-w", str(ws), "--recipe", "vrag_rl",
                                     "--config", str(cfg), "--limit", "3", "--run", f"r2-{len(ROWS)}", "-q"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            peak = 0.0
            while proc.poll() is None:
                peak = max(peak, _hwm_mb(proc.pid))
                time.sleep(0.05)
            text = proc.stdout.read()
        trajs = read_trajectories(ws / "runs" / f"r2-{len(ROWS)}")
        first = next((x for x in text.splitlines() if x.startswith("error:")), "")
        ROWS.append((label, "3 episodes", 3, str(proc.returncode == 3 and all(t.status == "error" and t.reason for t in trajs)),
                     sum(1 for t in trajs if not t.reason),
                     f"exit {proc.returncode} in {time.perf_counter() - t0:.1f} s, peak RSS {peak:.0f} MB; "
                     f"reason: {(trajs[0].reason if trajs else '')[:90]}; says: {first[:90]}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=8)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--search", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        ws = sample_workspace(tmp)
        for name, fn in (("synth-kill", lambda: synth_kill(ws, tmp, a.kills, a.samples, rng)),
                         ("ingest-kill", lambda: ingest_kill(tmp, a.kills, rng)),
                         ("export-kill", lambda: export_kill(ws, tmp, a.kills, rng)),
                         ("flaky", lambda: flaky(ws, tmp, a.samples)),
                         ("hostile", lambda: hostile(tmp)),
                         ("search-load", lambda: search_load(ws, a.search)),
                         ("round2", lambda: round2(tmp, ws))):
            if a.only and name not in a.only.split(","):
                continue
            t0 = time.perf_counter()
            fn()
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print("| scenario | faults | injected | run survived | records lost | notes |")
    print("|---|---|---:|---|---:|---|")
    for r in ROWS:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
