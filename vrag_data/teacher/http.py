"""One HTTP attempt against an OpenAI-compatible `/v1/chat/completions`, classified for the retry loop.

Why plain aiohttp instead of the OpenAI SDK: measured against a local server answering after 2 s with
256 requests in flight (DESIGN.md, bench/RESULTS.md), the SDK's transports cost 1.2-18 ms of client CPU
per request and left the server idle; a raw aiohttp POST costs a fraction of a millisecond and keeps it
saturated. The wire format is the same, so any vLLM / SGLang / OpenAI server works.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from vrag_data.config import EndpointConfig
from vrag_data.secrets import redact, redact_reply, redact_url, register_secret, register_url_secrets

try:  # orjson ships with prefect; the stdlib is the fallback
    import orjson

    dumps = orjson.dumps
    loads = orjson.loads
except ImportError:  # pragma: no cover

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj).encode()

    loads = json.loads


class ChatAnswer(NamedTuple):
    """One parsed reply. `undecodable`: the reply text held bytes that are not UTF-8 (or a lone-surrogate escape),
    replaced by U+FFFD; the text is valid Unicode either way, and the caller decides what such a reply is worth."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    undecodable: bool = False
    redacted: int = 0  # configured secrets (an API key, a URL's credentials) the reply echoed, replaced by a mark


class Retryable(Exception):
    """429, 5xx, timeouts, dropped connections, truncated JSON, empty choices: worth another attempt."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class Fatal(Exception):
    """A client error (4xx other than 429): retrying the same request cannot help. `status`: the HTTP status, when
    the server answered (None for a reply the client refused, e.g. one over the size cap); `detail`: the start of
    the server's answer, redacted."""

    def __init__(self, reason: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(reason)
        self.status, self.detail = status, detail


def endpoint_url(base_url: str, path: str) -> str:
    """`path` under `base_url`'s path, its query kept (`http://h/v1?k=v` + `/models` -> `http://h/v1/models?k=v`)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


class Endpoint:
    """One server of a role (shared by roles naming the same base_url + model): its session and counters.
    `base_url` is the URL as stored and printed (`redact_url`: no userinfo, no query values); the real one, with
    whatever credentials it carries, lives only in `url` and `models_url`, which are never logged."""

    def __init__(self, role: str, idx: int, cfg: EndpointConfig, api_key: str | None) -> None:
        self.role, self.idx, self.cfg = role, idx, cfg
        register_url_secrets(cfg.base_url)  # a key in the URL is redacted from any text, like an API key
        self.base_url = redact_url(cfg.base_url.rstrip("/"))
        real = cfg.base_url
        if api_key and urlsplit(real).password is not None:  # one Authorization header: the bearer key wins
            real = urlunsplit(urlsplit(real)._replace(netloc=urlsplit(real).netloc.rpartition("@")[2]))
        self.url = endpoint_url(real, "/chat/completions")
        self.models_url = endpoint_url(real, "/models")
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            register_secret(api_key)  # redacted from anything stored or printed, echoed bodies included
            self._headers["Authorization"] = f"Bearer {api_key}"  # kept in memory only, never logged
        self.in_flight = 0  # bounded by cfg.max_in_flight (TeacherPool._acquire)
        self.ok = 0
        self.failed = 0
        self._session: aiohttp.ClientSession | None = None

    def load(self) -> float:
        return self.in_flight / max(1, self.cfg.max_in_flight)

    def free(self) -> bool:
        return self.in_flight < self.cfg.max_in_flight

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self.cfg.max_in_flight, limit_per_host=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=conn, headers=self._headers, json_serialize=lambda o: dumps(o).decode())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# A chat reply larger than this is an error of the request (recorded), not something to hold in memory: a
# teacher's answer is a few KB; 8 MiB leaves room for long reasoning while a runaway stream cannot exhaust memory.
MAX_REPLY_BYTES = 8 << 20


async def _read_capped(r: aiohttp.ClientResponse, cap: int) -> bytes:
    chunks, n = [], 0
    async for chunk in r.content.iter_chunked(1 << 16):
        n += len(chunk)
        if n > cap:
            raise Fatal(f"reply larger than {cap:,} bytes (not retried): a runaway reply; check the endpoint's max_tokens")
        chunks.append(chunk)
    return b"".join(chunks)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _scrub(obj: Any) -> Any:
    """`obj` with every lone surrogate (what a `\\ud800` escape decodes to) replaced by U+FFFD: such a string cannot be
    encoded as UTF-8, so it could be neither stored in the request cache nor sent back in a later request."""
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def decode_body(raw: bytes) -> tuple[Any, bool]:
    """The response JSON, and whether it had to be decoded leniently. The strict decoder refuses a body with bytes
    that are not UTF-8 inside a string, or a lone-surrogate escape; such a body is the model's (or the server's)
    text, not a transport fault, so it is decoded with U+FFFD in place of what cannot be decoded. Raises ValueError
    for a body that is not JSON at all (truncated or garbled)."""
    try:
        return loads(raw), False
    except Exception:  # noqa: BLE001 - decided below: undecodable text, or JSON that is broken for good
        pass
    return _scrub(json.loads(raw.decode("utf-8", "replace"))), True


async def post_chat(ep: Endpoint, body: bytes, rid: str, timeout_s: float,
                    max_reply_bytes: int = MAX_REPLY_BYTES) -> ChatAnswer:
    """One HTTP attempt -> `ChatAnswer` (text, tokens, finish_reason, undecodable), or raises Retryable / Fatal."""
    try:
        async with ep.session().post(ep.url, data=body, headers={"X-Request-Id": rid}, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
            raw = await _read_capped(r, max_reply_bytes)
            status = r.status
            retry_after = r.headers.get("Retry-After")
    except TimeoutError:
        raise Retryable(f"timeout after {timeout_s:g}s") from None
    except (aiohttp.ClientError, OSError) as err:
        raise Retryable(f"connection error ({type(err).__name__})") from None
    if status == 429 or status >= 500:
        ra = None
        try:
            ra = float(retry_after) if retry_after else None
        except ValueError:
            pass
        # the kind leads the reason: the report groups failures by the text before any number
        raise Retryable("rate limited (HTTP 429)" if status == 429 else f"server error (HTTP {status})", ra)
    if status >= 400:
        snippet = redact(raw[:2000].decode("utf-8", "replace"))[:200].replace("\n", " ")
        raise Fatal(f"HTTP {status} (not retried): {snippet}", status, snippet)
    try:
        data, lenient = decode_body(raw)
        choices = data.get("choices") or []
    except Exception:  # noqa: BLE001 - truncated or garbled JSON is a transient server fault
        raise Retryable("truncated or invalid JSON in the response") from None
    if not choices:
        raise Retryable("empty response (no choices)")
    choice = choices[0] or {}
    # a choice with no text (the model stopped at once, or answered with a tool call) is the model's reply, not a
    # transport fault: retrying would pay for the same reply again; the environment records it as an invalid action
    text = (choice.get("message") or {}).get("content") or ""
    # a reply that echoes a configured key (a proxy that reflects the request's headers, a model that repeats its
    # prompt) is cached, logged and reported with the key replaced: only the count says it was there
    text, redacted = redact_reply(text)
    usage = data.get("usage") or {}
    # undecodable bytes elsewhere in the body (an id, a field the client ignores) leave the reply's text intact
    undecodable = lenient and "\ufffd" in text
    return ChatAnswer(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                      str(choice.get("finish_reason") or ""), undecodable, redacted)
