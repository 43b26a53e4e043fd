"""A server that echoes the API key back in its 401 body: the key never lands in any file the run writes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

import pytest

from tests.support.roles import model_roles
from tests.support.synth_workspace import sample_workspace
from typer.testing import CliRunner
from vrag_data.cli.main import app

KEY = "sk-test-echo-0123456789abcdef"


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None

    def _send(self, code: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"object": "list", "data": [{"id": "teacher", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(401, {"error": f"invalid credentials: {self.headers.get('Authorization')}"})


@pytest.mark.slow
def test_an_echoed_api_key_is_redacted_everywhere(tmp_path_factory, tmp_path, monkeypatch):
    import shutil

    ws = tmp_path / "ws"  # a private copy: this run's files must not show up in other tests' workspace snapshots
    shutil.copytree(sample_workspace(tmp_path_factory.getbasetemp()), ws, ignore=shutil.ignore_patterns("runs"))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("ECHO_KEY", KEY)
        cfg = tmp_path / "c.yaml"
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        policy = {"endpoints": [{"base_url": url, "model": "teacher", "api_key_env": "ECHO_KEY"}], "max_retries": 0}
        cfg.write_text(yaml.safe_dump({"roles": model_roles(policy)}))
        res = CliRunner().invoke(app, ["synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg), "--limit", "1",
                                       "--run", "echo-key", "-q"])
    finally:
        srv.shutdown()
    assert KEY not in res.output
    run = ws / "runs" / "echo-key"
    files = [p for p in run.rglob("*") if p.is_file()]
    assert files  # the run recorded its (failed) episode
    for p in files:
        assert KEY.encode() not in p.read_bytes(), p
    # the report holds the run's request errors (with their bodies): the key is in none of its files either
    rep = CliRunner().invoke(app, ["report", "-w", str(ws)])
    assert rep.exit_code == 0, rep.output
    assert KEY not in rep.output
    import duckdb

    with duckdb.connect(str(ws / "report.duckdb"), read_only=True) as con:
        errors = con.execute("SELECT count(*), string_agg(error, ' ') FROM requests WHERE is_error").fetchone()
    assert errors[0] > 0 and KEY not in (errors[1] or "")  # the echoed 401 bodies are there, redacted
    for p in (q for q in ws.rglob("*") if q.is_file()):
        assert KEY.encode() not in p.read_bytes(), p
    # the episode's recorded reason still says what happened, with the key replaced by a mark
    assert any(b"<redacted>" in p.read_bytes() for p in files)
