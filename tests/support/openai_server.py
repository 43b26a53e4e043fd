"""A scripted OpenAI-compatible server for tests and benchmarks (FastAPI + uvicorn, 127.0.0.1 only).

Use it in a test (server in a background thread of the test process)::

    from tests.support.openai_server import Faults, OpenAIServer

    with OpenAIServer(reply=lambda req: "<answer>42</answer>", faults=Faults(p500=0.2)) as srv:
        base_url = srv.base_url            # "http://127.0.0.1:<port>/v1", for EndpointConfig.base_url
        ...                                # talk to it with the real client
        srv.requests                       # list[SeenRequest], in arrival order (a snapshot copy)
        srv.request_ids(outcome="ok")      # X-Request-Id headers of requests answered with a reply
        srv.peak_in_flight                 # most chat requests handled at the same time
        srv.in_flight                      # chat requests being handled now

`hold` (a `threading.Event`): every chat request is held, after it is recorded, until the event is set, so a test
can count what arrived before anything is answered (routing, progress, cancellation) instead of relying on latency.

Endpoints: `GET /v1/models` (lists `models`, default ["teacher"]) and `POST /v1/chat/completions`.

`reply` decides the assistant text of a successful answer:
  * a callable `reply(request_json) -> str | dict | bytes` (a dict is sent as the whole response body, JSON-encoded;
    bytes are sent verbatim as the body, e.g. invalid UTF-8 inside the JSON),
  * a list of strings, consumed in order (the last one repeats once the list is exhausted),
  * None: the text "ok".

`faults` (a `Faults`) injects trouble. `Faults.script` is a list of outcomes applied to the first
requests in order, then each request draws from the rates (seeded by `seed`, so runs are reproducible):
  `p500`, `p429` (HTTP errors; 429 carries `Retry-After: 0`), `p_drop` (connection dropped after the
  headers), `p_truncate` (a 200 whose JSON body is cut in half), `p_empty` (`"choices": []`),
  `latency_s` (every request waits this long), `spike_p`/`spike_s` (latency spikes).
Script outcomes: "ok", "500", "429", "drop", "truncate", "empty", "slow" (waits `spike_s`).

Behaviour mode (`BehaviourMode`, a `reply` callable): each episode plays one scripted behaviour, picked by the
request's `seed` (the client sends the sampling seed + the sample index, so sample i plays `behaviours[i]`);
requests are attributed to an episode by an episode key (e.g. the task's question) found in their text, and
counted per (episode, behaviour, phase). Past `limit` calls of one phase the server answers with no choices, so a
loop that the code under test fails to bound ends with an error instead of hanging the test.

`api_key="..."` makes the server require `Authorization: Bearer <key>` (401 otherwise).
`echo_auth=True` makes it echo the `Authorization` header it got, as careless servers do: in the body of an injected
500 (JSON-escaped) and after the text of every reply.
`record_bodies=False` keeps only ids and outcomes (for benchmarks with large image payloads).

Every request is logged as a `SeenRequest(index, path, request_id, outcome, body_sha, body)`; `body` has
image data URIs replaced by `"<image sha256:...>"`. `srv.clear()` empties the log.

In another process (benchmarks, or a client that must not share the test's CPU), run
`python -m tests.support.openai_server --latency 2 --log requests.jsonl`; it prints `READY <port>` and
appends one JSON line (`request_id`, `outcome`) per request to the log. `OpenAIServerProcess(...)` wraps
this as a context manager with the same `base_url`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

Reply = Callable[[dict[str, Any]], "str | dict[str, Any] | bytes"] | list[str] | None
OUTCOMES = ("ok", "500", "429", "drop", "truncate", "empty", "slow")


@dataclass
class Faults:
    p500: float = 0.0
    p429: float = 0.0
    p_drop: float = 0.0
    p_truncate: float = 0.0
    p_empty: float = 0.0
    latency_s: float = 0.0
    spike_p: float = 0.0
    spike_s: float = 0.0
    script: list[str] = field(default_factory=list)


@dataclass
class SeenRequest:
    index: int
    path: str
    request_id: str
    outcome: str
    body_sha: str = ""
    body: dict[str, Any] | None = None
    at: float = 0.0


def _strip_images(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_images(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strip_images(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("data:image/"):
        return "<image sha256:" + hashlib.sha256(obj.encode()).hexdigest()[:16] + ">"
    return obj


def _usage(body: bytes, text: str) -> dict[str, int]:
    pt, ct = max(1, len(body) // 4), max(1, len(text) // 4)
    return {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}


class _Behaviour:
    """Shared by the in-thread and subprocess servers: decides each request's outcome and reply."""

    def __init__(self, reply: Reply, faults: Faults | None, models: list[str], seed: int, api_key: str | None,
                 record_bodies: bool, log_file: str | None = None) -> None:
        self.reply, self.faults, self.models = reply, faults or Faults(), models
        self.api_key, self.record_bodies = api_key, record_bodies
        self.echo_auth = False
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.seen: list[SeenRequest] = []
        self.active = 0  # chat requests being handled right now
        self.peak = 0
        self.hold: threading.Event | None = None  # set: requests go on; unset: each waits after it is recorded
        self.script = list(self.faults.script)
        self.replies = list(reply) if isinstance(reply, list) else None
        self._log = open(log_file, "a", buffering=1) if log_file else None  # noqa: SIM115 - lives with the server

    def outcome(self) -> str:
        with self.lock:
            if self.script:
                return self.script.pop(0)
            f, x = self.faults, self.rng.random()
            for name, p in (("500", f.p500), ("429", f.p429), ("drop", f.p_drop), ("truncate", f.p_truncate), ("empty", f.p_empty)):
                if x < p:
                    return name
                x -= p
            return "slow" if self.rng.random() < f.spike_p else "ok"

    def text_for(self, req: dict[str, Any]) -> "str | dict[str, Any] | bytes":
        if callable(self.reply):
            return self.reply(req)
        if self.replies is not None:
            with self.lock:
                return self.replies.pop(0) if len(self.replies) > 1 else (self.replies[0] if self.replies else "ok")
        return "ok"

    def record(self, path: str, rid: str, outcome: str, raw: bytes, req: dict[str, Any] | None) -> None:
        with self.lock:
            seen = SeenRequest(len(self.seen), path, rid, outcome, at=time.time())
            if self.record_bodies:
                seen.body_sha = hashlib.sha256(raw).hexdigest()
                seen.body = _strip_images(req) if req is not None else None
            self.seen.append(seen)
            if self._log is not None:
                self._log.write(json.dumps({"request_id": rid, "outcome": outcome}) + "\n")


def build_app(b: _Behaviour) -> FastAPI:
    app = FastAPI()

    def authorised(request: Request) -> bool:
        return b.api_key is None or request.headers.get("authorization") == f"Bearer {b.api_key}"

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        if not authorised(request):
            return Response(status_code=401, content=b'{"error":"bad key"}', media_type="application/json")
        data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in b.models]}
        return Response(content=orjson.dumps(data), media_type="application/json")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        raw = await request.body()
        rid = request.headers.get("x-request-id", "")
        if not authorised(request):
            b.record("/v1/chat/completions", rid, "401", raw, None)
            return Response(status_code=401, content=b'{"error":"bad key"}', media_type="application/json")
        try:
            req = orjson.loads(raw)
        except orjson.JSONDecodeError:
            b.record("/v1/chat/completions", rid, "400", raw, None)
            return Response(status_code=400, content=b'{"error":"invalid json"}', media_type="application/json")
        b.active += 1  # one event loop thread: no lock needed
        b.peak = max(b.peak, b.active)
        try:
            return await answer(req, raw, rid, request.headers.get("authorization", ""))
        finally:
            b.active -= 1

    async def answer(req: dict[str, Any], raw: bytes, rid: str, auth: str = "") -> Response:
        outcome = b.outcome()
        b.record("/v1/chat/completions", rid, outcome, raw, req)
        while b.hold is not None and not b.hold.is_set():  # held until the test releases it (it counts, it never times)
            await asyncio.sleep(0.005)
        delay = b.faults.latency_s + (b.faults.spike_s if outcome == "slow" else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if outcome == "500":
            body = orjson.dumps({"error": f"injected; credentials sent: {auth}"}) if b.echo_auth else b'{"error":"injected"}'
            return Response(status_code=500, content=body, media_type="application/json")
        if outcome == "429":
            return Response(status_code=429, content=b'{"error":"slow down"}', media_type="application/json", headers={"Retry-After": "0"})
        if outcome == "drop":
            async def broken():  # headers go out, then the connection dies mid-body
                yield b'{"id": "x", "choi'
                raise ConnectionResetError("injected drop")

            return StreamingResponse(broken(), media_type="application/json")
        if outcome == "empty":
            return Response(content=orjson.dumps({"id": "chatcmpl-x", "object": "chat.completion", "choices": []}), media_type="application/json")
        text = b.text_for(req)
        if b.echo_auth and isinstance(text, str):
            text += f"\n(credentials sent: {auth})"
        if isinstance(text, bytes):
            data = text  # the body verbatim: lets a test send bytes no JSON encoder would write
            return Response(content=data[: len(data) // 2] if outcome == "truncate" else data, media_type="application/json")
        if isinstance(text, dict):
            payload = text
        else:
            payload = {
                "id": "chatcmpl-" + (rid or "x"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": _usage(raw, text),
            }
        data = orjson.dumps(payload)
        if outcome == "truncate":
            data = data[: len(data) // 2]
        return Response(content=data, media_type="application/json")

    return app


@dataclass(frozen=True)
class Call:
    """One request as a behaviour script sees it: `n` = earlier calls of this phase in this episode."""

    req: dict[str, Any]
    episode: str
    behaviour: str
    phase: str
    n: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.req.get("messages") or []

    def text(self, m: dict[str, Any]) -> str:
        c = m.get("content")
        return c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c or [] if p.get("type") == "text")

    @property
    def system(self) -> str:
        msgs = self.messages
        return self.text(msgs[0]) if msgs and msgs[0].get("role") == "system" else ""

    @property
    def last(self) -> str:
        return self.text(self.messages[-1]) if self.messages else ""


class BehaviourMode:
    """A `reply` callable that plays one scripted behaviour per episode; see the module docstring.

    `script(call) -> str | dict | bytes` writes the reply (as a `reply` callable's return); `phase_of(request) -> str`
    names the role or step a request is for; `keys` are the episode keys (one of them occurs in every request of its
    episode); `seed_base` is the sampling seed the config sets. `counts` maps (episode, behaviour, phase) to the number of requests seen.
    """

    def __init__(self, behaviours: list[str], script: Callable[[Call], "str | dict[str, Any] | bytes"],
                 phase_of: Callable[[dict[str, Any]], str], keys: list[str], *, seed_base: int = 0, limit: int = 64) -> None:
        self.behaviours, self.script, self.phase_of = list(behaviours), script, phase_of
        self.keys = sorted(keys, key=len, reverse=True)  # the longest match first: a key may contain another
        self.seed_base, self.limit = seed_base, limit
        self.counts: dict[tuple[str, str, str], int] = {}
        self.unattributed = 0
        self._lock = threading.Lock()

    def episode_of(self, req: dict[str, Any]) -> str | None:
        blob = orjson.dumps(req.get("messages") or []).decode()
        return next((k for k in self.keys if orjson.dumps(k).decode()[1:-1] in blob), None)

    def __call__(self, req: dict[str, Any]) -> "str | dict[str, Any] | bytes":
        sample = int(req.get("seed", self.seed_base)) - self.seed_base
        behaviour = self.behaviours[sample] if 0 <= sample < len(self.behaviours) else "?"
        episode, phase = self.episode_of(req), self.phase_of(req)
        with self._lock:
            if episode is None:
                self.unattributed += 1
                episode = "?"
            k = (episode, behaviour, phase)
            n = self.counts.get(k, 0)
            self.counts[k] = n + 1
        if n >= self.limit:
            return {"id": "chatcmpl-limit", "object": "chat.completion", "choices": []}
        return self.script(Call(req, episode, behaviour, phase, n))


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this; without it uvicorn on a pre-bound socket answers keep-alive requests
    # 40 ms late (Nagle + delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    return sock


def _uvicorn(app: FastAPI) -> uvicorn.Server:
    cfg = uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off", timeout_keep_alive=120, backlog=4096)
    return uvicorn.Server(cfg)


class OpenAIServer:
    """In-thread scripted server; see the module docstring."""

    def __init__(self, reply: Reply = None, faults: Faults | None = None, *, models: list[str] | None = None,
                 seed: int = 0, api_key: str | None = None, record_bodies: bool = True,
                 hold: threading.Event | None = None, echo_auth: bool = False) -> None:
        self._b = _Behaviour(reply, faults, models or ["teacher"], seed, api_key, record_bodies)
        self._b.hold = hold
        self._b.echo_auth = echo_auth
        self._sock = _free_socket()
        self.port = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = _uvicorn(build_app(self._b))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def faults(self) -> Faults:
        return self._b.faults

    @property
    def requests(self) -> list[SeenRequest]:
        with self._b.lock:
            return list(self._b.seen)

    @property
    def in_flight(self) -> int:
        """Chat requests being handled now (held ones included)."""
        return self._b.active

    @property
    def peak_in_flight(self) -> int:
        """The most chat requests the server was handling at the same time."""
        return self._b.peak

    def request_ids(self, outcome: str | None = None) -> list[str]:
        return [r.request_id for r in self.requests if outcome is None or r.outcome == outcome]

    def clear(self) -> None:
        with self._b.lock:
            self._b.seen.clear()

    def start(self) -> "OpenAIServer":
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("scripted OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OpenAIServerProcess:
    """The same server in a child process (fixed reply text, faults from rates); `base_url`, `log_path`."""

    def __init__(self, *, latency_s: float = 0.0, reply: str = "ok", log_path: str | None = None, p500: float = 0.0,
                 p429: float = 0.0, models: list[str] | None = None) -> None:
        self.args = [sys.executable, "-m", "tests.support.openai_server", "--latency", str(latency_s), "--reply", reply,
                     "--p500", str(p500), "--p429", str(p429), "--models", ",".join(models or ["teacher"])]
        if log_path:
            self.args += ["--log", log_path]
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> "OpenAIServerProcess":
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True, cwd=root)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"scripted OpenAI server process did not start: {line!r}")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible server on 127.0.0.1")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--reply", default="ok")
    ap.add_argument("--p500", type=float, default=0.0)
    ap.add_argument("--p429", type=float, default=0.0)
    ap.add_argument("--models", default="teacher")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    b = _Behaviour([a.reply], Faults(p500=a.p500, p429=a.p429, latency_s=a.latency), a.models.split(","), 0, None, False, a.log)
    sock = _free_socket()
    server = _uvicorn(build_app(b))
    threading.Thread(target=lambda: (_wait_started(server), print(f"READY {sock.getsockname()[1]}", flush=True)), daemon=True).start()
    server.run(sockets=[sock])


def _wait_started(server: uvicorn.Server) -> None:
    while not server.started:
        time.sleep(0.01)


if __name__ == "__main__":
    main()
