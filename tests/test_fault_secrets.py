"""Configs and secrets. Bad configs (unknown keys, wrong types, missing or broken files, a literal key) fail
before any work with one line; an API key planted in an environment variable is used on the wire and
found in no output of a full run (workspace files, run folder, request cache, exports, report.duckdb,
report.html, Prefect's database, console output), searched inside compressed parquet, SQLite and DuckDB."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import OpenAIServer
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import sample_workspace
from vrag_data.cli.main import app

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

# every role the recipes use besides the policy is named: the teacher plays them (nothing is filled in)
SAME = {r: {"same_as": "policy"} for r in ("judge", "grounding", "reader", "planner")}

KEY = "sk-planted-7Qx2-DO-NOT-LEAK-90f1c3e8a4"
KEY_ENV = "VRAG_FAULT_TEST_KEY"


def _invoke(*args: object, env: dict[str, str] | None = None):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300", **(env or {})})
    return res, res.output  # stdout and stderr, interleaved


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ------------------------------------------------------------------------------------------- bad configs

BAD = {
    "unknown_key.yaml": ("synth:\n  samples: 2\n  sampels: 3\n", "synth.sampels"),
    "wrong_type.yaml": ("synth:\n  samples: many\n", "synth.samples"),
    "bad_yaml.yaml": ("synth: [unclosed\n", "not valid YAML"),
    "not_mapping.yaml": ("- just\n- a list\n", "mapping"),
    "unknown_role.yaml": ("roles:\n  oracle_boss:\n    kind: oracle\n", "unknown role"),
    "literal_key.yaml": (yaml.safe_dump({"roles": {"policy": {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                                                               "api_key": KEY}]}}}), "api_key"),
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


@pytest.mark.parametrize("name", [*BAD, "missing.yaml"])
def test_bad_config_fails_before_work_with_one_line(ws, tmp_path, name):
    cfg = tmp_path / name
    words = "config file not found"
    if name in BAD:
        text, words = BAD[name]
        cfg.write_text(text)
    before = _files(ws)
    for cmd in (["synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "never", "--config", cfg],
                ["export", "-w", ws, "--run", "never", "--config", cfg],
                ["tasks", "generate", "-w", ws, "--config", cfg]):
        res, out = _invoke(*cmd)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        assert res.exit_code == 2, (cmd[0], res.exit_code, out)
        assert len(lines) == 1 and lines[0].startswith("error:"), (cmd[0], out)
        assert words.lower() in lines[0].lower() and str(cfg) in lines[0], (cmd[0], lines[0])
        assert "Traceback" not in out and KEY not in out  # a literal key is refused without being echoed
    assert _files(ws) == before  # nothing was written


def test_unset_key_variable_fails_before_work(ws, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"roles": {"policy": {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": "teacher",
                                                                       "api_key_env": "VRAG_FAULT_UNSET_VAR"}]}, **SAME}}))
    os.environ.pop("VRAG_FAULT_UNSET_VAR", None)
    before = _files(ws)
    res, out = _invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--run", "never-key")
    assert res.exit_code != 0 and "VRAG_FAULT_UNSET_VAR" in out and "is not set" in out
    assert len([ln for ln in out.splitlines() if ln.strip()]) == 1
    assert _files(ws) == before


# --------------------------------------------------------------------------------------- planted key hunt


def find_secret(root: Path, secret: str) -> list[str]:
    """Every place under `root` that holds `secret`: file names, raw bytes, and the decoded contents of
    parquet (compressed columns), SQLite and DuckDB files."""
    needle = secret.encode()
    hits = []
    for p in sorted(root.rglob("*")):
        if secret in p.name:
            hits.append(f"{p}: file name")
        if not p.is_file() or p.is_symlink():
            continue
        data = p.read_bytes()
        if needle in data:
            hits.append(f"{p}: bytes")
        if p.suffix == ".parquet":
            if secret in str(pq.read_table(p).to_pylist()):
                hits.append(f"{p}: parquet rows")
        elif data[:16] == b"SQLite format 3\x00":
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                if secret in "\n".join(con.iterdump()):
                    hits.append(f"{p}: sqlite rows")
            finally:
                con.close()
        elif p.suffix == ".duckdb":
            con = duckdb.connect(str(p), read_only=True)
            try:
                for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
                    if secret in str(con.execute(f'SELECT * FROM "{table}"').fetchall()):
                        hits.append(f"{p}: duckdb table {table}")
            finally:
                con.close()
    return hits


def test_the_secret_finder_finds_a_planted_key(tmp_path):
    """The hunt below is only as good as this finder: it must see through compression and databases."""
    import pyarrow as pa

    pq.write_table(pa.table({"x": [KEY * 3]}), tmp_path / "a.parquet", compression="zstd")
    con = sqlite3.connect(tmp_path / "b.sqlite")
    con.execute("CREATE TABLE t (v TEXT)")
    con.execute("INSERT INTO t VALUES (?)", (KEY,))
    con.commit()
    con.close()
    dcon = duckdb.connect(str(tmp_path / "c.duckdb"))
    dcon.execute("CREATE TABLE t AS SELECT ? AS v", [KEY])
    dcon.close()
    (tmp_path / "d.html").write_text(f"<p>{KEY}</p>")
    hits = find_secret(tmp_path, KEY)
    assert {Path(h.split(":")[0]).name for h in hits} == {"a.parquet", "b.sqlite", "c.duckdb", "d.html"}, hits
    assert not find_secret(tmp_path, "sk-not-there")


def test_planted_api_key_is_used_but_never_written(ws, tmp_path):
    work = tmp_path / "ws"
    shutil.copytree(ws, work, ignore=shutil.ignore_patterns("runs", "exports", "report.*"))
    outputs: list[str] = []
    env = {KEY_ENV: KEY}
    with OpenAIServer(reply=teacher, api_key=KEY) as srv:  # 401 without the right bearer key
        policy = {"endpoints": [{"base_url": srv.base_url, "model": "teacher", "api_key_env": KEY_ENV}], "max_retries": 2,
                  "backoff_s": 0.01, "timeout_s": 20, "sampling": {"temperature": 0.0}}
        cfg = tmp_path / "cfg.yaml"
        # the scripted teacher truncates one turn per episode on purpose (the re-prompt path): the structure filter
        # would drop every episode and leave nothing to export, so this run keeps the correctness filter only
        cfg.write_text(yaml.safe_dump({"roles": {"policy": policy, **SAME}, "filters": {"chains": {"vrag_rl": ["correctness"]}}}))
        same = tmp_path / "same.yaml"  # the roles the flags do not set, named
        same.write_text(yaml.safe_dump({"roles": SAME}))
        steps = [
            ["synth", "-w", work, "--recipe", "vrag_rl", "--config", cfg, "--limit", 3, "--run", "keyed", "-q"],
            ["synth", "-w", work, "--recipe", "mmdoc_r1", "--limit", 2, "--run", "keyed-flags", "-q",
             "--policy-url", srv.base_url, "--policy-model", "teacher", "--policy-api-key-env", KEY_ENV, "--config", same],
            ["filter", "-w", work, "--run", "keyed", "--config", cfg],
            ["export", "-w", work, "--run", "keyed"],
            ["report", "-w", work],
        ]
        for step in steps:
            res, out = _invoke(*step, env=env)
            assert res.exit_code == 0, (step[0], out)
            outputs.append(out)
        statuses = [r.outcome for r in srv.requests]
    assert statuses and "401" not in statuses  # the key from the environment reached the server
    assert (work / "report.html").is_file() and (work / "report.duckdb").is_file() and (work / "exports" / "keyed").is_dir()
    hits = find_secret(tmp_path, KEY)  # the workspace (runs, exports, report) and the config next to it
    assert not hits, hits
    assert not [o for o in outputs if KEY in o]  # console output


@pytest.mark.slow  # starts a temporary Prefect server and runs a deployment (minutes on 2 cores)
@pytest.mark.soak  # `make test-soak`; the headline-command test runs the Prefect path in CI
def test_planted_api_key_stays_out_of_a_prefect_run(tmp_path):
    """The whole pipeline as `vrag-data run` (Prefect flows, artifacts, results and the server's database
    under the workspace) with the teacher behind a key: the key is in none of it."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    ws = tmp_path / "ws"
    with OpenAIServer(reply=teacher, api_key=KEY) as srv:
        policy = {"endpoints": [{"base_url": srv.base_url, "model": "teacher", "api_key_env": KEY_ENV}], "max_retries": 2,
                  "backoff_s": 0.01, "timeout_s": 20, "sampling": {"temperature": 0.0}}
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(yaml.safe_dump({
            "workspace": str(ws),
            "ingest": {"sample_corpus": 1, "layout": "off", "ocr": "off", "workers": 1},
            "tasks": {"format": "corpus", "limit": 3},
            "synth": {"recipes": ["vrag_rl"], "samples": 1},
            "roles": {"policy": policy, **SAME},
            "filters": {"chains": {"vrag_rl": ["correctness"]}},  # see above: something to export
            "export": {"formats": ["hf", "llamafactory", "verl"]},
            "runner": {"kind": "local", "max_concurrency": 2, "retries": 0},
        }))
        env = {**os.environ, KEY_ENV: KEY, "COLUMNS": "200", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "PREFECT_SERVER_API_HOST": "127.0.0.1"}
        env.pop("PREFECT_API_URL", None)
        env.pop("PREFECT_HOME", None)  # the run keeps Prefect's database in the workspace (ws/.prefect)
        proc = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "run", "--config", str(cfg), "-w", str(ws)],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        outcomes = [r.outcome for r in srv.requests]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcomes and "401" not in outcomes
    (db,) = (ws / ".prefect").glob("*.db")  # Prefect's own database lives in the workspace
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        n_artifacts = con.execute("SELECT count(*) FROM artifact").fetchone()[0]
    finally:
        con.close()
    assert n_artifacts >= 1, "the flow published no artifact: the hunt below would not cover artifacts"
    assert (ws / "report.html").is_file() and list((ws / "exports").iterdir())
    assert not find_secret(tmp_path, KEY)
    assert KEY not in proc.stdout and KEY not in proc.stderr
