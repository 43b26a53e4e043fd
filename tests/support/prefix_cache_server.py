"""A prefix-cache simulator: R OpenAI-compatible replicas on R ports (aiohttp, 127.0.0.1 only).

Each replica keeps an LRU prefix cache of `cache_tokens` tokens in blocks of 16, like vLLM's automatic prefix
caching. A request's prompt is turned into a token stream: text at ~4 bytes per token, each image at its
Qwen2.5-VL cost (h/28)*(w/28) tokens from its pixel size (read from the JPEG header). Full 16-token blocks are
chained hashes of everything before them, so a block is only reused when the whole prefix matches. A request
costs `prefill_s` per uncached prompt token plus `decode_s` per output token of simulated GPU time; the reply
waits that time x `time_scale` of wall time, so busier replicas really have more requests in flight.

    with PrefixCacheFleet(replicas=4, cache_tokens=400_000) as fleet:
        fleet.base_urls                  # ["http://127.0.0.1:<port>/v1", ...] for EndpointConfig.base_url
        fleet.stats()                    # per replica: requests, cached / computed prompt tokens, busy seconds
        fleet.ideal_cached               # prompt tokens an unbounded cache shared by all replicas would hold

`GET /stats` on any replica returns the same figures as JSON.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web
from PIL import Image

BLOCK = 16


def image_tokens(width: int, height: int) -> int:
    """Qwen2.5-VL visual tokens of an image of this pixel size (28x28 pixels per merged token)."""
    return max(1, (height // 28) * (width // 28))


def _image_size(uri: str) -> tuple[int, int]:
    data = base64.b64decode(uri.split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as im:  # reads the header only
        return im.size


def prompt_units(req: dict[str, Any]) -> list[tuple[bytes, int]]:
    """The prompt as (content digest, token count) units in order: each text part, each image."""
    units: list[tuple[bytes, int]] = []
    for m in req.get("messages", []):
        units.append((("role:" + str(m.get("role"))).encode(), 1))
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for p in parts:
            if p.get("type") == "image_url":
                uri = p["image_url"]["url"]
                w, h = _image_size(uri)
                units.append((hashlib.blake2b(uri.encode(), digest_size=16).digest(), image_tokens(w, h)))
            else:
                raw = str(p.get("text", "")).encode()
                units.append((raw, max(1, (len(raw) + 3) // 4)))
    return units


def block_hashes(units: list[tuple[bytes, int]]) -> tuple[list[bytes], int]:
    """Chained hashes of the full 16-token blocks of the prompt, and its total token count."""
    h = hashlib.blake2b(digest_size=16)
    out: list[bytes] = []
    total = 0
    for digest, n in units:
        # one hash update per unit; the block boundary inside it is marked by its offset
        start = total
        total += n
        h.update(digest)
        for b in range(start // BLOCK, total // BLOCK):  # blocks completed inside this unit
            hb = h.copy()
            hb.update(b.to_bytes(8, "little"))
            out.append(hb.digest())
    return out, total


@dataclass
class ReplicaStats:
    requests: int = 0
    cached_tokens: int = 0
    computed_tokens: int = 0
    output_tokens: int = 0
    busy_s: float = 0.0
    in_flight: int = 0
    peak_in_flight: int = 0


class Replica:
    def __init__(self, cache_tokens: int) -> None:
        self.blocks: OrderedDict[bytes, None] = OrderedDict()
        self.max_blocks = max(1, cache_tokens // BLOCK)
        self.stats = ReplicaStats()

    def lookup_and_insert(self, hashes: list[bytes]) -> int:
        """Cached prompt tokens (longest cached block prefix); then all blocks become most recently used."""
        hit = 0
        for hb in hashes:
            if hb not in self.blocks:
                break
            hit += 1
        for hb in hashes:
            self.blocks[hb] = None
            self.blocks.move_to_end(hb)
        while len(self.blocks) > self.max_blocks:
            self.blocks.popitem(last=False)
        return hit * BLOCK


class PrefixCacheFleet:
    def __init__(self, replicas: int = 4, *, cache_tokens: int = 400_000, prefill_s: float = 1 / 10_000,
                 decode_s: float = 1 / 1000, time_scale: float = 0.0, output_tokens: int = 48,
                 reply: str = "<search>next page</search>") -> None:
        self.replicas = [Replica(cache_tokens) for _ in range(replicas)]
        self.prefill_s, self.decode_s, self.time_scale = prefill_s, decode_s, time_scale
        self.output_tokens, self.reply = output_tokens, reply
        self._ideal: set[bytes] = set()  # every block ever seen anywhere: the "all earlier turns cached" bound
        self.ideal_cached = 0
        self.ports: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def base_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}/v1" for p in self.ports]

    def stats(self) -> dict[str, Any]:
        reps = [asdict(r.stats) for r in self.replicas]
        cached = sum(r["cached_tokens"] for r in reps)
        prompt = cached + sum(r["computed_tokens"] for r in reps)
        return {"replicas": reps, "cached_tokens": cached, "prompt_tokens": prompt, "ideal_cached_tokens": self.ideal_cached,
                "busy_s": sum(r["busy_s"] for r in reps)}

    def _handle(self, i: int, req: dict[str, Any]) -> tuple[float, int]:
        hashes, total = block_hashes(prompt_units(req))
        rep = self.replicas[i]
        cached = rep.lookup_and_insert(hashes)
        ideal = 0
        for hb in hashes:
            if hb not in self._ideal:
                break
            ideal += BLOCK
        self._ideal.update(hashes)
        self.ideal_cached += ideal
        out = min(self.output_tokens, int(req.get("max_tokens") or self.output_tokens))
        cost = (total - cached) * self.prefill_s + out * self.decode_s
        s = rep.stats
        s.requests += 1
        s.cached_tokens += cached
        s.computed_tokens += total - cached
        s.output_tokens += out
        s.busy_s += cost
        return cost, total

    def _app(self, i: int) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "teacher", "object": "model"}]})

        async def stats(_: web.Request) -> web.Response:
            return web.json_response(self.stats())

        async def chat(request: web.Request) -> web.Response:
            req = orjson.loads(await request.read())
            cost, total = self._handle(i, req)
            s = self.replicas[i].stats
            s.in_flight += 1
            s.peak_in_flight = max(s.peak_in_flight, s.in_flight)
            try:
                if self.time_scale > 0:
                    await asyncio.sleep(cost * self.time_scale)
            finally:
                s.in_flight -= 1
            out = min(self.output_tokens, int(req.get("max_tokens") or self.output_tokens))
            body = {"id": "cmpl", "object": "chat.completion", "model": req.get("model", "teacher"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": total, "completion_tokens": out, "total_tokens": total + out}}
            return web.Response(body=orjson.dumps(body), content_type="application/json")

        app.router.add_get("/v1/models", models)
        app.router.add_get("/stats", stats)
        app.router.add_post("/v1/chat/completions", chat)
        return app

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def start() -> None:
            self._runners = []
            for i in range(len(self.replicas)):
                runner = web.AppRunner(self._app(i), access_log=None)
                await runner.setup()
                site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
                await site.start()
                self.ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
                self._runners.append(runner)

        loop.run_until_complete(start())
        self._ready.set()
        loop.run_forever()
        for runner in self._runners:
            loop.run_until_complete(runner.cleanup())
        loop.close()

    def __enter__(self) -> "PrefixCacheFleet":
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("prefix-cache simulator did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
