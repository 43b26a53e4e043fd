"""Keys never reach the disk, and an answered request is never paid for twice (issue 39, round 3).

(a) An endpoint URL that carries credentials (a key in its query string, a password in its userinfo): the run uses
    them on the wire, but the manifest, trajectories, request cache, report and every printed line hold the URL as
    `http://host/v1?api_key=<redacted>` (the userinfo stripped); an endpoint that is down is named the same way in the error line.
(b) A 200 reply that echoes the API key: it is cached, stored and reported with the key replaced by the mark, and the
    run records how many replies did so (manifest stats, report, the command's summary line).
(c) A full disk under the request cache (a real write failure: the process's file-size limit): the stage stops with
    one line naming the cache and the fix, instead of going on with answers it cannot keep; the resumed run sends
    again at most the requests that were in flight when the write failed.

Every test talks to a real HTTP server on 127.0.0.1 and runs the real CLI.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from tests.support.roles import model_roles
from tests.support.scripted_teacher import teacher
from tests.support.synth_workspace import sample_workspace
from tests.test_fault_secrets import find_secret
from vrag_data.cli.main import app
from vrag_data.secrets import MARK, redact_url

REPO = Path(__file__).resolve().parents[2]
URL_KEY = "sk-url-query-5b1e0c7d9a2f4e68"  # in the endpoint URL's query string
URL_PASSWORD = "pw-userinfo-93c1d7e2b8a4f0"  # in the endpoint URL's userinfo
ECHO_KEY = "sk-echoed-in-reply-0f3a9c2e71d4"  # the API key (from the environment), echoed inside a 200 reply
ECHO_ENV = "VRAG_KEYS_TEST_ECHO_KEY"


class _Server:
    """An OpenAI-compatible server that answers wherever the client puts the query string (so a client that appends
    the path after the query still reaches it): `GET .../models`, `POST .../chat/completions`. It records every
    request's target, Authorization header and X-Request-Id (content-derived: the same request sent again has the same
    id); `reply(request_json, authorization) -> text`."""

    def __init__(self, reply: Callable[[dict[str, Any], str], str]) -> None:
        self.seen: list[tuple[str, str, str, str]] = []  # (method, target, authorization, request id)
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, code: int, obj: object) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped waiting (a stopped run)
                    pass

            def do_GET(self) -> None:  # noqa: N802
                with outer.lock:
                    outer.seen.append(("GET", self.path, self.headers.get("Authorization") or "", ""))
                if "models" not in self.path:
                    return self._send(404, {"error": "not found"})
                self._send(200, {"object": "list", "data": [{"id": "teacher", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                auth = self.headers.get("Authorization") or ""
                with outer.lock:
                    outer.seen.append(("POST", self.path, auth, self.headers.get("X-Request-Id") or ""))
                if "chat/completions" not in self.path:
                    return self._send(404, {"error": "not found"})
                text = reply(req, auth)
                self._send(200, {"id": "x", "object": "chat.completion", "model": "teacher",
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]

    def __enter__(self) -> "_Server":
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.srv.shutdown()
        self.srv.server_close()

    def chat_requests(self) -> list[tuple[str, str, str]]:
        """(target, authorization, request id) of every chat request so far."""
        with self.lock:
            return [s[1:] for s in self.seen if s[0] == "POST"]

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()


def _scripted(req: dict[str, Any], auth: str) -> str:
    return teacher(req)


def _echoing(req: dict[str, Any], auth: str) -> str:
    """The scripted teacher, with the request's Authorization header echoed inside its reasoning."""
    text = teacher(req)
    return text.replace("<think>", f"<think>(the request said {auth}) ", 1) if "<think>" in text else f"{text} ({auth})"


@pytest.fixture
def ws(tmp_path_factory, tmp_path) -> Path:
    """A private copy of the sample workspace: this test's runs must not show up in other tests' snapshots."""
    work = tmp_path / "ws"
    shutil.copytree(sample_workspace(tmp_path_factory.getbasetemp()), work, ignore=shutil.ignore_patterns("runs", "exports", "report.*"))
    return work


def _config(path: Path, base_url: str, key_env: str | None = None, **synth: Any) -> Path:
    ep: dict[str, Any] = {"base_url": base_url, "model": "teacher"}
    if key_env:
        ep["api_key_env"] = key_env
    policy = {"endpoints": [ep], "max_retries": 0, "timeout_s": 20, "sampling": {"temperature": 0.0}}
    path.write_text(yaml.safe_dump({"roles": model_roles(policy), **({"synth": synth} if synth else {})}))
    return path


def _invoke(*args: object, env: dict[str, str] | None = None):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300", **(env or {})})
    return res, res.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redact_url_hides_userinfo_and_query_values():
    assert redact_url("http://user:pw@127.0.0.1:8000/v1?api_key=sk-xyz") == f"http://127.0.0.1:8000/v1?api_key={MARK}"
    assert redact_url("https://h.example/v1/?a=1&b=two#frag") == f"https://h.example/v1/?a={MARK}&b={MARK}#{MARK}"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"  # nothing to hide: unchanged
    assert redact_url("http://[::1/v1?k=v") == f"http://[::1/v1?k={MARK}"  # not a valid URL: still no value kept


# ----------------------------------------------------------------------------------------- (a) key in the URL


@pytest.mark.slow
def test_a_key_in_the_endpoint_url_is_used_but_never_stored_or_printed(ws, tmp_path):
    with _Server(_scripted) as srv:
        url = f"http://user:{URL_PASSWORD}@127.0.0.1:{srv.port}/v1?api_key={URL_KEY}"
        cfg = _config(tmp_path / "cfg.yaml", url)
        res, out = _invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 2, "--run", "url-key", "-q")
        assert res.exit_code == 0, out
        chats = srv.chat_requests()
    # the credentials reached the server: the key in the query string, the password as Basic auth
    assert chats and all(URL_KEY in target for target, _, _ in chats), chats[:2]
    assert all(auth.startswith("Basic ") for _, auth, _ in chats)
    res, rep_out = _invoke("report", "-w", ws)
    assert res.exit_code == 0, rep_out
    cfg.unlink()  # the user's own config holds the URL; everything the tool wrote must not
    for secret in (URL_KEY, URL_PASSWORD):
        hits = find_secret(tmp_path, secret)
        assert not hits, hits
        assert secret not in out and secret not in rep_out
    # the URL is still recorded, redacted: the manifest and the report say which server answered
    manifest = (ws / "runs" / "url-key" / "manifest.json").read_text()
    assert f"http://127.0.0.1:{srv.port}/v1?api_key={MARK}" in manifest
    with duckdb.connect(str(ws / "report.duckdb"), read_only=True) as con:
        endpoints = {e for (e,) in con.execute("SELECT DISTINCT endpoint FROM requests WHERE endpoint <> 'cache'").fetchall()}
    assert endpoints == {f"http://127.0.0.1:{srv.port}/v1?api_key={MARK}"}


def test_an_endpoint_that_is_down_is_named_without_its_key(ws, tmp_path):
    url = f"http://user:{URL_PASSWORD}@127.0.0.1:{_free_port()}/v1?api_key={URL_KEY}"
    cfg = _config(tmp_path / "cfg.yaml", url)
    res, out = _invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 1, "--run", "down", "-q")
    assert res.exit_code != 0
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0], out
    assert url.replace(f"user:{URL_PASSWORD}@", "").replace(URL_KEY, MARK) in lines[0], lines[0]  # userinfo stripped
    assert URL_KEY not in out and URL_PASSWORD not in out
    cfg.unlink()
    assert not find_secret(tmp_path, URL_KEY) and not find_secret(tmp_path, URL_PASSWORD)


# ------------------------------------------------------------------------------------- (b) key echoed in a 200


@pytest.mark.slow
def test_a_key_echoed_in_a_200_reply_is_redacted_and_counted(ws, tmp_path):
    with _Server(_echoing) as srv:
        cfg = _config(tmp_path / "cfg.yaml", f"http://127.0.0.1:{srv.port}/v1", ECHO_ENV)
        res, out = _invoke("synth", "-w", ws, "--recipe", "vrag_rl", "--config", cfg, "--limit", 2, "--run", "echo-200",
                           env={ECHO_ENV: ECHO_KEY})
        assert res.exit_code == 0, out
        chats = srv.chat_requests()
    assert chats and all(auth == f"Bearer {ECHO_KEY}" for _, auth, _ in chats)  # every reply echoed the key
    res, rep_out = _invoke("report", "-w", ws)
    assert res.exit_code == 0, rep_out
    hits = find_secret(tmp_path, ECHO_KEY)
    assert not hits, hits  # request cache, trajectories, request log, report.duckdb, report.html
    assert ECHO_KEY not in out and ECHO_KEY not in rep_out
    # the run says so: the manifest's stats, the report's runs table, the command's summary line
    stats = json.loads((ws / "runs" / "echo-200" / "manifest.json").read_text())["stats"]
    assert stats["redacted_replies"] == len(chats), stats
    with duckdb.connect(str(ws / "report.duckdb"), read_only=True) as con:
        (run_stats,) = con.execute("SELECT stats FROM runs WHERE run_id = 'echo-200'").fetchone()
    assert json.loads(run_stats)["redacted_replies"] == len(chats)
    assert "echoed a configured API key" in out, out
    # the replies themselves are kept, with the mark where the key was
    assert any(f"(the request said Bearer {MARK})".encode() in p.read_bytes() for p in (ws / "runs" / "echo-200").rglob("*.sqlite"))


def test_the_reward_judge_names_its_endpoint_and_an_echoing_reply_without_the_keys(monkeypatch):
    """The trainers' judge client (a reward entry point): a URL with credentials reaches the judge, and the error it
    raises when the judge only echoes the key back names neither the URL's credentials nor the key."""
    from vrag_data.rewards.judge_client import ask, judge_setting

    monkeypatch.setenv(ECHO_ENV, ECHO_KEY)
    with _Server(lambda req, auth: f"I will not judge this; the request said {auth}") as srv:
        url = f"http://user:{URL_PASSWORD}@127.0.0.1:{srv.port}/v1?api_key={URL_KEY}"
        ep = judge_setting({"judge_url": url, "judge_model": "teacher", "judge_api_key_env": ECHO_ENV})
        with pytest.raises(RuntimeError) as err:
            ask(ep, "You grade answers.", "Question: q? Reference: 1. Prediction: 1.")
        chats = srv.chat_requests()
    assert chats and all(URL_KEY in target and auth == f"Bearer {ECHO_KEY}" for target, auth, _ in chats), chats[:1]
    msg = str(err.value)
    assert f"http://127.0.0.1:{srv.port}/v1?api_key={MARK}" in msg and MARK in msg.split("unreadable reply")[-1], msg
    assert ECHO_KEY not in msg and URL_KEY not in msg and URL_PASSWORD not in msg, msg


# ------------------------------------------------------------------------------ (c) the cache is written first


def _limit_file_size(max_bytes: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    return apply


@pytest.mark.slow
def test_a_cache_that_cannot_be_written_stops_the_stage_and_resume_repays_nothing_answered(ws, tmp_path):
    """The request cache's disk fills up after a few answers (every file this process writes is capped at 64 KiB; the
    cache's write-ahead log reaches that first): today's runner recorded each failed write as an episode error and
    went on asking, so a resume paid again for every answer it could not keep."""
    with _Server(_scripted) as srv:
        cfg = _config(tmp_path / "cfg.yaml", f"http://127.0.0.1:{srv.port}/v1", concurrent_episodes=2)
        cmd = [sys.executable, "-m", "vrag_data.cli.main", "synth", "-w", str(ws), "--recipe", "vrag_rl", "--config", str(cfg),
               "--limit", "8", "--run", "full-disk", "-q"]
        full = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size(64 << 10),
                              env={**os.environ, "COLUMNS": "300"})
        first = [rid for _, _, rid in srv.chat_requests()]
        cache = ws / "runs" / "full-disk" / "requests.sqlite"
        assert full.returncode != 0, full.stdout + full.stderr
        errors = [ln for ln in full.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in full.stderr, full.stderr
        assert str(cache) in errors[0] and "free space" in errors[0], errors[0]
        srv.clear()
        again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"})
        assert again.returncode == 0, again.stdout + again.stderr
        second = [rid for _, _, rid in srv.chat_requests()]
    repaid = set(first) & set(second)
    # at most the requests in flight when the write failed (one per running episode) are asked again
    assert first and len(repaid) <= 2, (len(first), len(repaid))
    manifest = json.loads((ws / "runs" / "full-disk" / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["stats"]["errors"] == 0, manifest["stats"]
