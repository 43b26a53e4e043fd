"""A configured key is redacted in every form it can travel in, whatever its length: as is, JSON-escaped, URL-encoded,
HTML-escaped, and as the base64 `Basic` credentials a URL's userinfo is sent as. A real run against a local server
that echoes the credentials it gets (in an error body, JSON-escaped, and after every reply) writes none of them to
any file: run folder, request log, parquet, report.duckdb, report.html; nor to the console. Ordinary words that merely
contain a short key are left as they are."""

from __future__ import annotations

import base64
import html
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from tests.support.openai_server import Faults, OpenAIServer
from tests.support.roles import model_roles
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import sample_workspace
from vrag_data.cli.main import app
from vrag_data.secrets import MARK, redact, register_secret, register_url_secrets

KEY = 's"k\\t2'  # 6 characters: s " k \ t 2 (JSON escapes two of them, a URL three)
KEY_ENV = "VRAG_SHORT_KEY_TEST"
USER, PASSWORD = "vrag", 'p"w\\6x'  # the userinfo of the second endpoint's URL, percent-encoded there


def _forms(secret: str) -> set[str]:
    """How `secret` can be written: hand-listed encodings, each checked on its own."""
    return {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret), html.escape(secret)}


BASIC = "dnJhZzpwIndcNng="  # base64 of 'vrag:p"w\6x', what `Authorization: Basic` carries for that userinfo
NEEDLES = _forms(KEY) | _forms(PASSWORD) | {BASIC}


def test_every_form_of_a_short_key_is_redacted_and_words_are_not():
    register_secret(KEY)
    register_url_secrets(f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:9/v1")
    assert base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() == BASIC
    for needle in NEEDLES:
        assert redact(f"Authorization: Bearer {needle}!") == f"Authorization: Bearer {MARK}!", needle
        assert redact(f'{{"error": "bad key {needle}"}}') == f'{{"error": "bad key {MARK}"}}', needle
    assert redact("Authorization: Basic dnJhZzpwIndcNng=") == f"Authorization: Basic {MARK}"
    # a short key is redacted where it stands alone, not out of the middle of a longer word
    register_secret("sk-two")
    assert redact("Bearer sk-two") == f"Bearer {MARK}" and redact("a sk-twofold rise") == "a sk-twofold rise"
    assert redact("the user role") == "the user role"  # a URL's user name is not a key


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in _strings(v)]
    return []


def _leaks(root: Path) -> list[str]:
    """Where under `root` a needle is: raw bytes of every file, and the decoded text of parquet, SQLite and DuckDB."""
    hits = []
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        data = p.read_bytes()
        texts = []
        if p.suffix == ".parquet":
            texts = _strings(pq.read_table(p).to_pylist())
        elif data[:16] == b"SQLite format 3\x00":
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
                    texts += _strings([list(r) for r in con.execute(f'SELECT * FROM "{table}"').fetchall()])
            finally:
                con.close()
        elif p.suffix == ".duckdb":
            with duckdb.connect(str(p), read_only=True) as con:
                for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
                    texts += _strings([list(r) for r in con.execute(f'SELECT * FROM "{table}"').fetchall()])
        hits += [f"{p}: bytes {n!r}" for n in NEEDLES if n.encode() in data]
        hits += [f"{p}: text {n!r}" for n in NEEDLES if any(n in t for t in texts)]
    return hits


@pytest.mark.slow
def test_a_run_against_a_server_echoing_the_credentials_writes_none_of_them(tmp_path_factory, tmp_path, monkeypatch):
    ws = tmp_path / "ws"  # a private copy: this run's files must not show up in other tests' workspace snapshots
    shutil.copytree(sample_workspace(tmp_path_factory.getbasetemp()), ws, ignore=shutil.ignore_patterns("runs"))
    monkeypatch.setenv(KEY_ENV, KEY)
    output, seen = [], []
    for run in ("short-key", "userinfo"):
        # the first request of each run: an error body echoing the credentials (JSON-escaped); then echoing replies
        with OpenAIServer(teacher, Faults(script=["500"]), echo_auth=True) as srv:
            userinfo_url = f"http://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{srv.port}/v1"
            endpoint = ({"base_url": srv.base_url, "model": "teacher", "api_key_env": KEY_ENV} if run == "short-key"
                        else {"base_url": userinfo_url, "model": "teacher"})
            cfg = tmp_path / f"{run}.yaml"
            cfg.write_text(yaml.safe_dump({"roles": model_roles({"endpoints": [endpoint], "max_retries": 2})}))
            res = CliRunner().invoke(app, ["synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg),
                                           "--limit", "2", "--run", run], env={"COLUMNS": "300"})
            assert res.exit_code == 0, res.output
            output.append(res.output)
            seen.append([r.outcome for r in srv.requests])
    assert [s.count("500") for s in seen] == [1, 1] and all(s.count("ok") >= 2 for s in seen), seen
    rep = CliRunner().invoke(app, ["report", "-w", str(ws)])
    assert rep.exit_code == 0, rep.output
    output.append(rep.output)
    assert (ws / "report.html").is_file() and (ws / "report.duckdb").is_file()
    assert _leaks(ws) == []
    with duckdb.connect(str(ws / "report.duckdb"), read_only=True) as con:  # the stored URLs carry no userinfo
        urls = {e for (e,) in con.execute("SELECT DISTINCT endpoint FROM requests WHERE endpoint <> 'cache'").fetchall()}
    assert len(urls) == 2 and all(u.startswith("http://127.0.0.1:") and "@" not in u for u in urls), urls
    assert [n for n in NEEDLES if any(n in out for out in output)] == []
    # the echoes were there, and were replaced by the mark (the replies are stored with it)
    runs = [p for p in (ws / "runs").rglob("*") if p.is_file()]
    assert any(MARK.encode() in p.read_bytes() for p in runs if p.suffix != ".parquet")
