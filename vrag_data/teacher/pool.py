"""The teacher pool: OpenAI-compatible endpoints per role, behind the durable request cache.

Transport: see `vrag_data.teacher.http` (plain aiohttp, measured in bench/RESULTS.md).

Each endpoint has its own bound on requests in flight (`max_in_flight`), independent of how many episodes
run; a call goes to the least-loaded endpoint of its role with a free slot, waits first-come-first-served
for the next freed slot when all are full, and is re-routed on retry. A call that names its episode
(`affinity=`) goes to the replica that served the episode's previous call while that replica's load is within
`affinity_bound` x the least loaded, so the server's prefix cache holds its history (`vrag_data.teacher.routing`).

A reply is kept as the server sent it, with two exceptions that make it unusable whatever it says, both flagged on the
`ChatResult` and stored with it in the request cache (a resume replays the same flags): text that was not valid UTF-8
is decoded with U+FFFD in its place (`undecodable`, see `http.decode_body`), and a runaway reply longer than
`MAX_REPLY_CHARS` is kept as its first `KEPT_REPLY_CHARS` characters and a marker (`cut_from`: its length), so a
megabyte of rambling is neither cached nor handed on. `finish_reason` ("length": cut at max_tokens) is kept too.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import aiohttp

from vrag_data.config import EndpointConfig, RoleConfig, SamplingConfig
from vrag_data.errors import VragError
from vrag_data.schema.records import Message, RequestLog
from vrag_data.keys import KeyNotFound, resolve_key
from vrag_data.secrets import redact, redact_url
from vrag_data.teacher.cache import CachedResponse, RequestCache
from vrag_data.teacher.http import Endpoint, Fatal, Retryable, dumps, loads, post_chat
from vrag_data.teacher.accept import accept
from vrag_data.teacher.refusal import REFUSING, refused_line
from vrag_data.teacher.messages import ImageLoader, data_uri, image_ref_key, request_key, to_openai
from vrag_data.teacher.roles import resolve_roles, substitutions
from vrag_data.teacher.routing import DEFAULT_BOUND, AffinityTable, least_loaded, route

_NONCE = uuid.uuid4().hex[:16]  # image placeholders no prompt text can collide with
MAX_REPLY_CHARS = 65_536  # a teacher's reply is a few KB; a longer one is runaway generation (the grammar's own limit)
KEPT_REPLY_CHARS = 4_000  # what is kept of a runaway reply


class TeacherError(VragError):
    """A teacher call failed for good (after bounded retries, or a non-retryable error); one-line reason."""


class EndpointRefused(TeacherError):
    """The endpoint refuses the role's requests (HTTP 401/403/404, `refusal.REFUSING`): no other request can do better."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    request_id: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    retries: int
    endpoint: str
    model: str
    finish_reason: str = ""  # "length": cut at max_tokens
    undecodable: bool = False  # the text held bytes that are not UTF-8, replaced by U+FFFD (see `http.decode_body`)
    cut_from: int = 0  # a runaway reply's length in characters, when only its start is kept (see the module doc)
    problem: str = ""  # why the reply is unusable whatever it says ('' = usable): set by `accept`, the one door


def _api_key(role: str, i: int, ep: EndpointConfig) -> str | None:
    if not ep.api_key_env:
        return None
    try:  # the environment, then the key sources (`vrag_data.keys`); found nowhere: one line naming every place
        return resolve_key(ep.api_key_env, f"role {role}: endpoint {redact_url(ep.base_url)}, roles.{role}.endpoints[{i}].api_key_env")
    except KeyNotFound as err:
        raise TeacherError(str(err)) from None


class TeacherPool:
    """`await pool.chat(role, messages)` with caching, routing, bounded in-flight requests and retries."""

    def __init__(
        self,
        roles: Mapping[str, RoleConfig],
        cache: RequestCache,
        run_id: str,
        *,
        image_cache_size: int = 256,
        seed: int | None = None,
        affinity_bound: float = DEFAULT_BOUND,
    ) -> None:
        if affinity_bound < 1.0:
            raise TeacherError(f"affinity_bound must be >= 1.0 (got {affinity_bound}); 1.25 keeps episodes on their replica")
        self.affinity_bound = affinity_bound
        self._affinity = AffinityTable()
        self.roles = resolve_roles(roles)
        self.cache = cache
        self.run_id = run_id
        self._rng = random.Random(seed)
        self._endpoints: dict[str, list[Endpoint]] = {}
        # Roles that name the same server share one endpoint object, so its in-flight bound holds for the server.
        shared: dict[tuple[str, str, str | None], Endpoint] = {}
        for role, rc in self.roles.items():
            if rc.kind != "openai":
                continue
            if not rc.endpoints:
                raise TeacherError(f"role {role}: kind openai needs at least one endpoint (roles.{role}.endpoints)")
            eps = []
            for i, ep in enumerate(rc.endpoints):
                k = (ep.base_url.rstrip("/"), ep.model, ep.api_key_env)
                if k not in shared:
                    shared[k] = Endpoint(role, i, ep, _api_key(role, i, ep))
                eps.append(shared[k])
            self._endpoints[role] = eps
        self._unique = list(shared.values())
        # (image ref, max_pixels) -> (sha256 of the JPEG, its data URI): each page is rendered, hashed and
        # base64-encoded once, not once per request that shows it.
        self._images: OrderedDict[tuple[str, int | None], tuple[str, bytes]] = OrderedDict()
        self._image_cache_size = image_cache_size
        self._inflight: dict[str, asyncio.Future[ChatResult]] = {}
        # Calls waiting for a free slot, per endpoint group (a role's replicas), first come first served.
        self._waiters: dict[tuple[int, ...], deque[asyncio.Future[Endpoint]]] = {}
        self._rr = 0
        self._c = {"calls": 0, "requests": 0, "cache_hits": 0, "errors": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0,
                   "redacted_replies": 0}
        self._latency = 0.0

    # -- public ----------------------------------------------------------------------------------------
    def kind(self, role: str) -> str:
        rc = self.roles.get(role)
        return rc.kind if rc is not None else "missing"

    def same_as(self, role: str) -> str | None:
        """The role `role` was configured to be (`same_as`), or None."""
        rc = self.roles.get(role)
        return rc.same_as if rc is not None else None

    def substitutions(self) -> dict[str, str]:
        return substitutions(self.roles)

    def models(self) -> dict[str, str]:
        """role -> model name (first endpoint), for trajectory provenance."""
        return {r: eps[0].cfg.model for r, eps in self._endpoints.items()}

    async def check(self) -> None:
        """GET /models on every endpoint before work: an endpoint that cannot be asked raises one clear line at once;
        models an endpoint does not serve are gathered and raised together, every role's in one line."""
        timeout = aiohttp.ClientTimeout(total=10)
        seen: set[tuple[str, str]] = set()
        wrong: list[str] = []
        for role, eps in self._endpoints.items():
            for ep in eps:
                if (ep.base_url, ep.cfg.model) in seen:
                    continue
                seen.add((ep.base_url, ep.cfg.model))
                where = f"role {role}: endpoint {ep.base_url}"
                fix = f"start the server or fix roles.{role}.endpoints[{ep.idx}].base_url"
                try:
                    async with ep.session().get(ep.models_url, timeout=timeout) as r:
                        body = await r.read()
                        status = r.status
                except (aiohttp.ClientError, OSError, TimeoutError) as err:
                    raise TeacherError(f"{where} is unreachable ({type(err).__name__}: {redact(str(err)) or 'no reply'}); {fix}") from None
                if status in REFUSING:
                    rc = self.roles[ep.role]
                    raise EndpointRefused(refused_line(role, rc.same_as or ep.role, ep.idx, ep.base_url, status, "GET /models",
                                                       ep.cfg.api_key_env, redact(body[:500].decode("utf-8", "replace"))))
                if status != 200:
                    raise TeacherError(f"{where} answered GET /models with HTTP {status}; {fix}")
                try:
                    served = [m.get("id") for m in loads(body).get("data", [])]
                except Exception:  # noqa: BLE001 - any malformed body gets the same message
                    raise TeacherError(f"{where} answered GET /models with a body that is not an OpenAI model list; {fix}") from None
                if served and ep.cfg.model not in served:
                    wrong.append(f"{where} does not serve model {ep.cfg.model!r} (it serves {served}); fix "
                                 f"roles.{role}.endpoints[{ep.idx}].model")
        if wrong:
            raise TeacherError(("; ".join(wrong) if len(wrong) == 1 else f"{len(wrong)} wrong model names: " + " | ".join(wrong)))

    async def chat(
        self,
        role: str,
        messages: Sequence[Message],
        *,
        sample: int = 0,
        image_loader: ImageLoader | None = None,
        max_pixels: int | None = None,
        sampling: SamplingConfig | None = None,
        affinity: str | None = None,
    ) -> ChatResult:
        """`affinity`: an episode key (e.g. the episode id); calls sharing it stick to one replica (see module doc).
        It only routes: it is not part of the request cache key. Every reply comes through the one door
        (`vrag_data.teacher.accept`): normalised text, and `problem` set when it is unusable."""
        return accept(await self._chat(role, messages, sample=sample, image_loader=image_loader, max_pixels=max_pixels,
                                       sampling=sampling, affinity=affinity))

    async def _chat(self, role: str, messages: Sequence[Message], *, sample: int, image_loader: ImageLoader | None,
                    max_pixels: int | None, sampling: SamplingConfig | None, affinity: str | None) -> ChatResult:
        eps = self._endpoints.get(role)
        if eps is None:
            raise TeacherError(f"role {role} has no OpenAI-compatible endpoint (kind: {self.kind(role)}); configure roles.{role}")
        rc = self.roles[role]
        sp = sampling or rc.sampling
        model = eps[0].cfg.model  # replicas of a role serve the same model: one key whatever replica answers
        uris, hashes = await self._load_images(messages, image_loader, max_pixels)
        params = _sampling_params(sp, sample)
        key = request_key(model, messages, hashes, params, sample)
        self._c["calls"] += 1
        hit = self.cache.get(key)
        if hit is not None:
            return self._replay(role, hit)
        pending = self._inflight.get(key)
        if pending is not None:  # the same request is already on the wire: share its answer
            res = await asyncio.shield(pending)
            self._c["cache_hits"] += 1
            return ChatResult(**{**res.__dict__, "cached": True, "retries": 0})
        fut: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            aff = None if affinity is None else f"{role}\x00{affinity}"
            res = await self._call(role, rc, key, model, _body(model, messages, uris, params), aff)
            fut.set_result(res)
            return res
        except BaseException as err:
            fut.set_exception(err if isinstance(err, Exception) else TeacherError("cancelled"))
            fut.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._inflight.pop(key, None)

    def stats(self) -> dict[str, Any]:
        c = dict(self._c)
        c["in_flight"] = sum(ep.in_flight for ep in self._unique)
        c["mean_latency_s"] = self._latency / c["requests"] if c["requests"] else 0.0
        c["endpoints"] = [
            {"base_url": ep.base_url, "model": ep.cfg.model, "in_flight": ep.in_flight, "ok": ep.ok, "failed": ep.failed}
            for ep in self._unique
        ]
        c["affinity"] = self._affinity.stats()
        return c

    async def close(self) -> None:
        for ep in self._unique:
            await ep.close()
        self.cache.close()  # flushes the log; the connection closes now, not whenever it is collected

    async def __aenter__(self) -> "TeacherPool":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- internals -------------------------------------------------------------------------------------
    def _replay(self, role: str, hit: CachedResponse) -> ChatResult:
        self._c["cache_hits"] += 1
        self.cache.log(RequestLog(request_id=_rid(hit.key), run_id=self.run_id, role=role, model=hit.model, endpoint="cache",
                                  status="cached", prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens))
        return ChatResult(hit.text, _rid(hit.key), hit.prompt_tokens, hit.completion_tokens, 0.0, True, 0, "cache", hit.model,
                          hit.finish_reason, hit.undecodable, hit.cut_from)

    async def _acquire(self, eps: list[Endpoint], affinity: str | None = None) -> Endpoint:
        """A slot on the least-loaded endpoint with room (or the episode's home, see `routing.route`); if all
        are full, wait for the first freed one (routing at release time, so a fast replica is not stuck behind
        a queue on a slow one)."""
        free = [ep.free() for ep in eps]
        if any(free):
            self._rr += 1
            # in-flight + 1 over capacity: an idle fleet compares finite loads, one extra call is the unit
            loads = [(ep.in_flight + 1) / max(1, ep.cfg.max_in_flight) for ep in eps]
            start = self._rr % len(eps)  # rotate: ties spread evenly
            if affinity is None:
                i = least_loaded(loads, free, start)
            else:
                i = route(loads, free, self._affinity.home(affinity), self.affinity_bound, start)
                assert i is not None
                self._affinity.record(affinity, i)
            assert i is not None
            ep = eps[i]
            ep.in_flight += 1
            return ep
        fut: asyncio.Future[Endpoint] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(tuple(id(e) for e in eps), deque()).append(fut)
        try:
            ep = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(fut.result())  # a slot was handed over just as we were cancelled
            raise
        if affinity is not None:
            self._affinity.record(affinity, eps.index(ep))
        return ep

    def _release(self, ep: Endpoint) -> None:
        ep.in_flight -= 1
        for group, queue in self._waiters.items():
            if id(ep) not in group:
                continue
            while queue:
                fut = queue.popleft()
                if not fut.done():
                    ep.in_flight += 1
                    fut.set_result(ep)
                    return

    async def _call(self, role: str, rc: RoleConfig, key: str, model: str, body: bytes, affinity: str | None = None) -> ChatResult:
        rid = _rid(key)
        t0 = time.perf_counter()
        attempt = 0
        while True:
            ep = await self._acquire(self._endpoints[role], affinity)
            retry: Retryable | None = None
            try:
                ans = await post_chat(ep, body, rid, rc.timeout_s)
            except Retryable as err:
                retry = err
            except Fatal as err:
                ep.failed += 1
                self._give_up(role, rid, model, ep, t0, attempt, str(err), self._refused(role, ep, err))
            finally:
                self._release(ep)
            if retry is None:
                break
            ep.failed += 1
            if attempt >= rc.max_retries:
                self._give_up(role, rid, model, ep, t0, attempt, f"{retry.reason} (gave up after {attempt + 1} attempts)")
            delay = self._rng.uniform(0, min(rc.backoff_max_s, rc.backoff_s * 2**attempt))  # full jitter
            if retry.retry_after is not None:
                delay = max(delay, min(retry.retry_after, rc.backoff_max_s))
            attempt += 1
            self._c["retries"] += 1
            await asyncio.sleep(delay)
        ep.ok += 1
        text, pt, ct, finish, undecodable, redacted = ans
        self._c["redacted_replies"] += redacted > 0  # the reply echoed a configured key: stored with a mark in its place
        text, cut_from = cut_runaway(text)
        latency = time.perf_counter() - t0
        self._c["requests"] += 1
        self._c["prompt_tokens"] += pt
        self._c["completion_tokens"] += ct
        self._latency += latency
        log = RequestLog(request_id=rid, run_id=self.run_id, role=role, model=model, endpoint=ep.base_url, status="ok",
                         latency_s=latency, retries=attempt, prompt_tokens=pt, completion_tokens=ct)
        await self.cache.put_async(CachedResponse(key, model, text, pt, ct, latency, finish, undecodable, cut_from), log)  # durable before use
        self.cache.maybe_flush_log()
        return ChatResult(text, rid, pt, ct, latency, False, attempt, ep.base_url, model, finish, undecodable, cut_from)

    def _refused(self, role: str, ep: Endpoint, err: Fatal) -> str | None:
        """The line for an endpoint that refuses the role (401/403/404), naming the config key that fixes it."""
        if err.status not in REFUSING:
            return None
        rc = self.roles[role]
        return refused_line(role, rc.same_as or role, self._endpoints[role].index(ep), ep.base_url, err.status,
                            "POST /chat/completions", ep.cfg.api_key_env, err.detail)

    def _give_up(self, role: str, rid: str, model: str, ep: Endpoint, t0: float, attempt: int, reason: str,
                 refused: str | None = None) -> NoReturn:
        self._c["errors"] += 1
        self.cache.log(RequestLog(request_id=rid, run_id=self.run_id, role=role, model=model, endpoint=ep.base_url, status="error",
                                  error=reason, latency_s=time.perf_counter() - t0, retries=attempt))
        if refused is not None:
            raise EndpointRefused(refused)
        raise TeacherError(f"role {role} ({model} at {ep.base_url}): {reason}")

    async def _load_images(self, messages: Sequence[Message], loader: ImageLoader | None, max_pixels: int | None) -> tuple[list[bytes], list[str]]:
        refs = [ref for m in messages for ref in m.images]
        if not refs:
            return [], []
        if loader is None:
            raise TeacherError("messages carry images but no image_loader was given to TeacherPool.chat")
        uris, hashes = [], []
        for ref in refs:
            k = (image_ref_key(ref), max_pixels)
            got = self._images.get(k)
            if got is None:
                kw = {} if max_pixels is None else {"max_pixels": max_pixels}
                data = await asyncio.to_thread(loader, ref, **kw)  # rendering + JPEG encoding is CPU work
                got = (hashlib.sha256(data).hexdigest(), data_uri(data).encode("ascii"))
                self._images[k] = got
                if len(self._images) > self._image_cache_size:
                    self._images.popitem(last=False)
            else:
                self._images.move_to_end(k)
            hashes.append(got[0])
            uris.append(got[1])
        return uris, hashes


def _body(model: str, messages: Sequence[Message], uris: Sequence[bytes], params: dict[str, Any]) -> bytes:
    """The request JSON. Images are spliced in after serialising: a data URI is base64 (never needs JSON
    escaping), and serialising ~0.4 MB of it per request would cost ~1 ms of CPU each time."""
    if not uris:
        return dumps({"model": model, "messages": to_openai(messages, []), **params})
    mark = f"@@image-{_NONCE}@@"
    raw = dumps({"model": model, "messages": to_openai(messages, [mark] * len(uris)), **params})
    # Split the small JSON at the placeholders and join once with the data URIs: one copy of the large
    # payload (replacing placeholders one by one rescanned and copied the whole growing body each time).
    pieces = raw.split(mark.encode())
    if len(pieces) != len(uris) + 1:
        raise TeacherError(f"request body has {len(pieces) - 1} image placeholders for {len(uris)} images")
    out = [pieces[0]]
    for uri, piece in zip(uris, pieces[1:], strict=True):
        out += (uri, piece)
    return b"".join(out)


def cut_runaway(text: str) -> tuple[str, int]:
    """(text, 0) for a reply of at most `MAX_REPLY_CHARS` characters; else (its first `KEPT_REPLY_CHARS` characters and a
    marker, its length)."""
    if len(text) <= MAX_REPLY_CHARS:
        return text, 0
    return text[:KEPT_REPLY_CHARS] + f"\n[runaway reply cut here: {len(text):,} characters, the first {KEPT_REPLY_CHARS:,} kept]", len(text)


def _rid(key: str) -> str:
    return "rq_" + key[:24]


def _sampling_params(sp: SamplingConfig, sample: int) -> dict[str, Any]:
    p: dict[str, Any] = {"temperature": sp.temperature, "top_p": sp.top_p, "max_tokens": sp.max_tokens}
    if sp.seed is not None:
        p["seed"] = sp.seed + sample  # one seed for all samples would make them identical on vLLM
    if sp.stop:
        p["stop"] = list(sp.stop)
    p.update(sp.extra_body)
    return p
