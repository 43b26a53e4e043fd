"""The synth flow's first error line is the root cause, as a user reads it in `prefect deployment run ... --watch`: the
flow run's Failed state message and its first ERROR log line. The flow runs in this process against a temporary Prefect
server (`prefect_test_harness`), with the parameters a deployment run passes (config, input, recipe).

Three causes: a question writer (a real HTTP server on 127.0.0.1) that answers the chat requests 401 while listing its
models; an input named `.pdf` that is text; several recipes with the roles they use left out."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

prefect = pytest.importorskip("prefect")
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from flows.flows import synth  # noqa: E402
from tests.support.roles import ORACLE_ROLES  # noqa: E402

pytestmark = pytest.mark.heavy  # a Prefect server


class _RefusingWriter(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose model list is open and whose chat endpoint wants a key nobody sent."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._send(200, {"object": "list", "data": [{"id": "writer", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.chats += 1  # type: ignore[attr-defined]
        self._send(401, {"error": {"message": "invalid api key"}})

    def _send(self, status: int, body: dict) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def harness() -> Iterator[None]:
    with prefect_test_harness(server_startup_timeout=300):
        yield


@pytest.fixture(scope="module")
def one_pdf(tmp_path_factory) -> Path:
    from vrag_data.sample import make_sample_corpus

    made = make_sample_corpus(tmp_path_factory.mktemp("pdf") / "sample", docs=1, seed=0)
    return Path(made.paths[0])


def _config(tmp: Path, roles: dict, **sections: dict) -> str:
    cfg = {"workspace": str(tmp / "ws"), "ingest": {"ocr": "off", "workers": 1}, "synth": {"recipes": ["vrag_rl"]},
           "roles": roles, "runner": {"max_concurrency": 1, "retries": 0, "retry_delay_s": 0}, **sections}
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _api(path: str, body: dict) -> list[dict]:
    import httpx
    from prefect.settings import PREFECT_API_URL

    res = httpx.post(f"{PREFECT_API_URL.value()}/{path}", json=body, timeout=30)
    res.raise_for_status()
    return res.json()


def _first_error(err: BaseException) -> tuple[str, str, str]:
    """(the exception's line, the synth flow run's state message, its first ERROR log line) of the latest synth run."""
    runs = [r for r in _api("flow_runs/filter", {"sort": "EXPECTED_START_TIME_DESC", "limit": 20})
            if r["parent_task_run_id"] is None and r["name"].startswith("synth-")]
    run = runs[0]
    assert run["state"]["type"] == "FAILED", run["state"]
    deadline = time.monotonic() + 30
    while True:  # log lines go out in batches
        logs = _api("logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}, "level": {"ge_": 40}},
                                    "sort": "TIMESTAMP_ASC", "limit": 50})
        if logs or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert logs, f"no ERROR line in flow run {run['name']}"
    return str(err), run["state"]["message"], logs[0]["message"]


@pytest.mark.slow  # ingest, index and the writer's first batch: over a minute on a loaded two-core machine
def test_a_writer_answering_401_is_the_first_error_line(harness, one_pdf, tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingWriter)
    srv.chats = 0  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        writer = {"kind": "openai", "endpoints": [{"base_url": f"http://127.0.0.1:{port}/v1?key=s3cret", "model": "writer"}]}
        cfg = _config(tmp_path, {**ORACLE_ROLES, "student": {"kind": "extractive"}, "question_writer": writer},
                      tasks={"generate": {"n": 20}})
        with pytest.raises(Exception) as err:
            synth(cfg, input=str(one_pdf))
    finally:
        srv.shutdown()
    cause = (f"question writer: http://127.0.0.1:{port}/v1?key=<redacted> answered HTTP 401 Unauthorized to POST "
             '/chat/completions ({"error": {"message": "invalid api key"}}); check '
             "roles.question_writer.endpoints[0].api_key_env (none is set: name the environment variable that holds "
             "this server's key)")
    raised, state, first = _first_error(err.value)
    assert raised == f"tasks generate: {cause}"
    assert state.endswith(f"tasks generate: {cause}")
    assert first == f"failed: tasks generate: {cause}"
    assert "s3cret" not in state + first
    # it stopped at the refusal: one batch of concurrent attempts at most, not the 6 x 20 attempts of the budget
    assert 1 <= srv.chats <= 20  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_text_file_named_pdf_is_the_first_error_line(harness, tmp_path):
    bad = tmp_path / "notes.pdf"
    bad.write_text("meeting notes, plain text\n")
    cfg = _config(tmp_path, {**ORACLE_ROLES, "student": {"kind": "extractive"}}, tasks={"generate": {"writer": "offline"}})
    with pytest.raises(Exception) as err:
        synth(cfg, input=str(bad))
    cause = ("ingest: nothing could be ingested: ingest shard 0: no usable document (notes.pdf: not a PDF (file starts "
             "with b'meeting '); convert it or remove it from the inputs)")
    raised, state, first = _first_error(err.value)
    assert raised == cause
    assert state.endswith(cause) and "no pages to index" not in state
    assert first == f"failed: {cause}"


@pytest.mark.slow
def test_every_missing_role_of_every_recipe_is_in_the_first_error_line(harness, one_pdf, tmp_path):
    cfg = _config(tmp_path, {}, tasks={"generate": {"writer": "offline"}})
    with pytest.raises(Exception) as err:
        synth(cfg, input=str(one_pdf), recipe=["vrag_rl", "evisrag"])
    raised, state, first = _first_error(err.value)
    assert raised.startswith(f"{cfg}: 4 role problems: (1) roles.policy: missing; ")
    for line in ("(2) roles.grounding: recipe vrag_rl uses it",
                 "(3) roles.judge: recipe vrag_rl uses it (decides whether the final answer matches the reference), "
                 "as do recipe(s) evisrag; configure an endpoint, `kind: rules`, or `same_as: policy`",
                 "(4) role 'student' (needed by filter difficulty of recipe evisrag's RL chain) is not configured"):
        assert line in raised
    assert state.endswith(raised)
    assert first == f"failed: {raised}" and "\n" not in first
    assert not (tmp_path / "ws").exists()  # stopped before any work
