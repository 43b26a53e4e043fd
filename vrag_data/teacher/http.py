"""One HTTP attempt against an OpenAI-compatible `/v1/chat/completions`, classified for the retry loop.

Why plain aiohttp instead of the OpenAI SDK: measured against a local server answering after 2 s with
256 requests in flight (DESIGN.md, bench/RESULTS.md), the SDK's transports cost 1.2-18 ms of client CPU
per request and left the server idle; a raw aiohttp POST costs a fraction of a millisecond and keeps it
saturated. The wire format is the same, so any vLLM / SGLang / OpenAI server works.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from vrag_data.secrets import redact, register_secret
from vrag_data.config import EndpointConfig

try:  # orjson ships with prefect; the stdlib is the fallback
    import orjson

    dumps = orjson.dumps
    loads = orjson.loads
except ImportError:  # pragma: no cover
    import json

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj).encode()

    loads = json.loads


class Retryable(Exception):
    """429, 5xx, timeouts, dropped connections, truncated JSON, empty choices: worth another attempt."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class Fatal(Exception):
    """A client error (4xx other than 429): retrying the same request cannot help."""


class Endpoint:
    """One server of a role (shared by roles naming the same base_url + model): its session and counters."""

    def __init__(self, role: str, idx: int, cfg: EndpointConfig, api_key: str | None) -> None:
        self.role, self.idx, self.cfg = role, idx, cfg
        self.base_url = cfg.base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
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


async def post_chat(ep: Endpoint, body: bytes, rid: str, timeout_s: float,
                    max_reply_bytes: int = MAX_REPLY_BYTES) -> tuple[str, int, int, str]:
    """One HTTP attempt -> (text, prompt_tokens, completion_tokens, finish_reason), or raises Retryable / Fatal."""
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
        raise Fatal(f"HTTP {status} (not retried): {snippet}")
    try:
        data = loads(raw)
        choices = data.get("choices") or []
    except Exception:  # noqa: BLE001 - truncated or garbled JSON is a transient server fault
        raise Retryable("truncated or invalid JSON in the response") from None
    if not choices:
        raise Retryable("empty response (no choices)")
    choice = choices[0] or {}
    # a choice with no text (the model stopped at once, or answered with a tool call) is the model's reply, not a
    # transport fault: retrying would pay for the same reply again; the environment records it as an invalid action
    text = (choice.get("message") or {}).get("content") or ""
    usage = data.get("usage") or {}
    return text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), str(choice.get("finish_reason") or "")
