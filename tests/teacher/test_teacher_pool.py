"""The teacher pool through its real HTTP client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable

import pytest

from tests.support.openai_server import Faults, OpenAIServer
from vrag_data.config import EndpointConfig, RoleConfig, SamplingConfig
from vrag_data.errors import ConfigError
from vrag_data.schema import Box
from vrag_data.schema.records import ImageRef, Message
from vrag_data.store.shards import read_table
from vrag_data.teacher import RequestCache, TeacherError, TeacherPool, resolve_roles


def role(*urls: str, max_retries: int = 4, timeout_s: float = 10.0, key_env: str | None = None, max_in_flight: int = 256) -> RoleConfig:
    return RoleConfig(
        endpoints=[EndpointConfig(base_url=u, model="teacher", api_key_env=key_env, max_in_flight=max_in_flight) for u in urls],
        max_retries=max_retries, timeout_s=timeout_s, backoff_s=0.01, backoff_max_s=0.05,
    )


def user(text: str, images: list[ImageRef] | None = None) -> list[Message]:
    return [Message(role="system", text="You are a teacher."), Message(role="user", text=text, images=images or [])]


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


async def _check(pool: TeacherPool) -> None:
    async with pool:
        await pool.check()


async def _chat_all(pool: TeacherPool, texts: list[str], **kw) -> list:  # noqa: ANN003
    async with pool:
        return await asyncio.gather(*(pool.chat("policy", user(t), **kw) for t in texts))


def test_retries_on_429_and_500_then_succeeds(tmp_path):
    with OpenAIServer(reply=["<answer>7</answer>"], faults=Faults(script=["429", "500", "truncate", "empty", "drop"])) as srv:
        pool = TeacherPool({"policy": role(srv.base_url, max_retries=6)}, RequestCache(tmp_path), "r1")
        [res] = run(_chat_all(pool, ["q"]))
        assert res.text == "<answer>7</answer>"
        assert res.retries == 5 and not res.cached
        assert [r.outcome for r in srv.requests] == ["429", "500", "truncate", "empty", "drop", "ok"]
        assert len(set(srv.request_ids())) == 1  # the same request id on every attempt
    log = read_table(str(tmp_path / "requests")).to_pylist()
    assert [(r["status"], r["retries"]) for r in log] == [("ok", 5)]


def test_gives_up_after_max_retries_with_a_one_line_reason(tmp_path):
    with OpenAIServer(faults=Faults(p500=1.0)) as srv:
        pool = TeacherPool({"policy": role(srv.base_url, max_retries=2)}, RequestCache(tmp_path), "r1")
        with pytest.raises(TeacherError) as err:
            run(_chat_all(pool, ["q"]))
        assert len(srv.requests) == 3  # first attempt + 2 retries, then stop
    msg = str(err.value)
    assert "\n" not in msg and "gave up after 3 attempts" in msg and "HTTP 500" in msg
    [row] = read_table(str(tmp_path / "requests")).to_pylist()
    assert row["status"] == "error" and "HTTP 500" in row["error"]


def test_client_errors_are_not_retried(tmp_path):
    with OpenAIServer(api_key="right") as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("VRAG_TEST_KEY", "wrong-key-of-this-test")  # (a key is redacted from all text the process writes)
        pool = TeacherPool({"policy": role(srv.base_url, key_env="VRAG_TEST_KEY")}, RequestCache(tmp_path), "r1")
        with pytest.raises(TeacherError, match="HTTP 401"):
            run(_chat_all(pool, ["q"]))
        assert len(srv.requests) == 1


def test_timeout_is_retried(tmp_path):
    with OpenAIServer(faults=Faults(script=["slow"], spike_s=0.8)) as srv:
        pool = TeacherPool({"policy": role(srv.base_url, timeout_s=0.2)}, RequestCache(tmp_path), "r1")
        [res] = run(_chat_all(pool, ["q"]))
        assert res.text == "ok" and res.retries == 1


async def _release_when(pool: TeacherPool, texts: list[str], ready: Callable[[], bool], gate: threading.Event) -> list:
    """All calls at once against servers that hold each request until `gate` is set: set once `ready()` says what the
    test waits for has arrived (counted, never timed), then every call's result."""
    async with pool:
        calls = asyncio.ensure_future(asyncio.gather(*(pool.chat("policy", user(t)) for t in texts)))
        for _ in range(12_000):  # a guard against a hang (2 min), not a timing: the asserts say what went wrong
            if ready() or calls.done():
                break
            await asyncio.sleep(0.01)
        gate.set()
        return await calls


def test_least_loaded_routing_spreads_load_over_two_replicas(tmp_path):
    """No request is answered before all 40 are in flight, so each routing decision sees the load the earlier ones
    put on the replicas, however slowly a loaded machine sends them: 20 and 20 (no latency to race against)."""
    gate = threading.Event()
    with OpenAIServer(hold=gate) as a, OpenAIServer(hold=gate) as b:
        pool = TeacherPool({"policy": role(a.base_url, b.base_url)}, RequestCache(tmp_path), "r1")
        res = run(_release_when(pool, [f"q{i}" for i in range(40)], lambda: a.in_flight + b.in_flight >= 40, gate))
        assert len(a.requests) == 20 and len(b.requests) == 20
        assert {r.endpoint for r in res} == {a.base_url, b.base_url}


def test_busy_replica_gets_fewer_requests(tmp_path):
    """Replica A holds what it gets (its 4 slots fill and stay full), B answers at once: every other call goes to B.
    A is released only once B has answered the rest, so no timing decides the split: at most 4 to A."""
    gate = threading.Event()
    with OpenAIServer(hold=gate) as a, OpenAIServer() as b:
        pool = TeacherPool({"policy": role(a.base_url, b.base_url, max_in_flight=4)}, RequestCache(tmp_path), "r1")
        run(_release_when(pool, [f"q{i}" for i in range(40)], lambda: a.in_flight + len(b.requests) >= 40, gate))
        assert len(a.requests) + len(b.requests) == 40
        assert len(a.requests) <= 4 and len(b.requests) > 2 * len(a.requests)


def test_in_flight_bound_per_endpoint(tmp_path):
    """Requests are held until 3 are in flight (the bound), then released: the server never saw a 4th at once."""
    gate = threading.Event()
    with OpenAIServer(hold=gate) as srv:
        pool = TeacherPool({"policy": role(srv.base_url, max_in_flight=3)}, RequestCache(tmp_path), "r1")
        run(_release_when(pool, [f"q{i}" for i in range(30)], lambda: srv.in_flight >= 3, gate))
        assert srv.peak_in_flight == 3 and len(srv.requests) == 30


def test_cache_replays_a_finished_run_without_http(tmp_path):
    texts = [f"question {i}" for i in range(10)]
    with OpenAIServer(reply=lambda req: "echo " + req["messages"][-1]["content"]) as srv:
        first = run(_chat_all(TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1"), texts))
        assert len(srv.requests) == 10
        srv.clear()
        second = run(_chat_all(TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1"), texts))
        assert srv.requests == []  # zero HTTP requests on the re-run
    assert [r.text for r in second] == [r.text for r in first] == [f"echo {t}" for t in texts]
    assert all(r.cached for r in second) and not any(r.cached for r in first)
    statuses = sorted(r["status"] for r in read_table(str(tmp_path / "requests")).to_pylist())
    assert statuses == ["cached"] * 10 + ["ok"] * 10


def test_samples_and_sampling_are_part_of_the_key(tmp_path):
    with OpenAIServer() as srv:
        pool = TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1")

        async def go():  # noqa: ANN202
            async with pool:
                await pool.chat("policy", user("q"), sample=0)
                await pool.chat("policy", user("q"), sample=1)
                await pool.chat("policy", user("q"), sample=1, sampling=SamplingConfig(temperature=0.0, seed=5))
                await pool.chat("policy", user("q"), sample=0)  # repeat: cached

        run(go())
        assert len(srv.requests) == 3
        bodies = [r.body for r in srv.requests]
    assert bodies[2]["temperature"] == 0.0 and bodies[2]["seed"] == 6  # seed + sample index


def test_identical_concurrent_calls_share_one_request(tmp_path):
    with OpenAIServer(faults=Faults(latency_s=0.1)) as srv:
        res = run(_chat_all(TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1"), ["same"] * 5))
        assert len(srv.requests) == 1
    assert len({r.request_id for r in res}) == 1 and sum(not r.cached for r in res) == 1


def test_images_go_as_jpeg_data_uris_and_the_key_hashes_their_bytes(tmp_path):
    pages = {"doc_1": b"\xff\xd8jpeg-one\xff\xd9", "doc_2": b"\xff\xd8jpeg-two\xff\xd9"}
    calls: list[str] = []

    def loader(ref: ImageRef) -> bytes:
        calls.append(ref.page_id)
        return pages[ref.page_id]

    crop = ImageRef(page_id="doc_1", box=Box.from_raw([0, 0, 10, 10], 100, 100))
    with OpenAIServer() as srv:
        pool = TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1")

        async def go():  # noqa: ANN202
            async with pool:
                await pool.chat("policy", user("look", [ImageRef(page_id="doc_1"), ImageRef(page_id="doc_2")]), image_loader=loader)
                await pool.chat("policy", user("look", [crop]), image_loader=loader)

        run(go())
        first = srv.requests[0].body["messages"][1]["content"]
        assert [p["type"] for p in first] == ["image_url", "image_url", "text"]
        assert all(p["image_url"]["url"].startswith("<image sha256:") for p in first[:2])  # the server got data URIs
        assert len(srv.requests) == 2
        # A fresh pool (new image cache) whose loader renders the same bytes hits the response cache.
        srv.clear()
        pool2 = TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1")

        async def again():  # noqa: ANN202
            async with pool2:
                r1 = await pool2.chat("policy", user("look", [crop]), image_loader=loader)
                pages["doc_1"] = b"\xff\xd8re-rendered\xff\xd9"
                pool2._images.clear()  # noqa: SLF001 - force a re-render, as a new process would
                r2 = await pool2.chat("policy", user("look", [crop]), image_loader=loader)
                return r1, r2

        r1, r2 = run(again())
        assert r1.cached and not r2.cached  # different JPEG bytes -> a different request
        assert len(srv.requests) == 1
    assert calls.count("doc_2") == 1


def test_missing_api_key_variable_fails_before_any_request(tmp_path, monkeypatch):
    monkeypatch.delenv("VRAG_MISSING_KEY", raising=False)
    with OpenAIServer() as srv:
        with pytest.raises(TeacherError) as err:
            TeacherPool({"policy": role(srv.base_url, key_env="VRAG_MISSING_KEY")}, RequestCache(tmp_path), "r1")
        assert srv.requests == []
    assert "VRAG_MISSING_KEY" in str(err.value) and "\n" not in str(err.value)


def test_api_key_is_sent_but_never_stored(tmp_path, monkeypatch):
    secret = "sk-planted-7f3a9c"
    monkeypatch.setenv("VRAG_TEST_KEY", secret)
    with OpenAIServer(api_key=secret) as srv:
        pool = TeacherPool({"policy": role(srv.base_url, key_env="VRAG_TEST_KEY")}, RequestCache(tmp_path), "r1")

        async def go():  # noqa: ANN202
            async with pool:
                await pool.check()
                return await pool.chat("policy", user("q"))

        assert run(go()).text == "ok"
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_check_reports_an_unreachable_endpoint_in_one_line(tmp_path):
    with OpenAIServer() as srv:
        dead = srv.base_url  # a port that was just closed
    pool = TeacherPool({"policy": role(dead)}, RequestCache(tmp_path), "r1")

    with pytest.raises(TeacherError) as err:
        run(_check(pool))
    msg = str(err.value)
    assert "unreachable" in msg and dead in msg and "roles.policy.endpoints[0].base_url" in msg and "\n" not in msg


def test_check_reports_a_model_the_server_does_not_serve(tmp_path):
    with OpenAIServer(models=["other-model"]) as srv:
        pool = TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1")

        with pytest.raises(TeacherError, match="does not serve model 'teacher'"):
            run(_check(pool))


def test_roles_are_never_filled_in_and_same_as_is_explicit():
    pol = role("http://127.0.0.1:9/v1")
    roles = resolve_roles({"policy": pol, "judge": role("http://127.0.0.1:10/v1")})
    assert set(roles) == {"policy", "judge"}  # no grounding/reader/planner stand-ins
    roles = resolve_roles({"policy": pol, "grounding": RoleConfig(same_as="policy")})
    assert roles["grounding"].endpoints == pol.endpoints and roles["grounding"].same_as == "policy"
    oracle = resolve_roles({"policy": RoleConfig(kind="oracle")})
    assert set(oracle) == {"policy"}
    with pytest.raises(ConfigError, match="roles.judge.same_as: 'grounding' is not a configured role"):
        resolve_roles({"policy": pol, "judge": RoleConfig(same_as="grounding")})
    with pytest.raises(ConfigError, match="roles.judge.same_as: roles.grounding is itself same_as policy"):
        resolve_roles({"policy": pol, "grounding": RoleConfig(same_as="policy"), "judge": RoleConfig(same_as="grounding")})


def test_roles_on_the_same_server_share_its_in_flight_bound(tmp_path):
    with OpenAIServer(faults=Faults(latency_s=0.05)) as srv:
        same = RoleConfig(same_as="policy")
        pool = TeacherPool({"policy": role(srv.base_url, max_in_flight=2), "judge": same, "grounding": same},
                           RequestCache(tmp_path), "r1")

        async def go():  # noqa: ANN202
            async with pool:
                await asyncio.gather(*(pool.chat(r, user(f"{r}{i}")) for i in range(6) for r in ("policy", "judge", "grounding")))

        run(go())
        assert srv.peak_in_flight == 2 and len(srv.requests) == 18


def test_cache_survives_reopening_and_is_wal(tmp_path):
    with OpenAIServer() as srv:
        run(_chat_all(TeacherPool({"policy": role(srv.base_url)}, RequestCache(tmp_path), "r1"), ["a", "b"]))
    db = sqlite3.connect(tmp_path / "requests.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 2


# -- episode-affine routing ---------------------------------------------------------------------------------

def test_route_keeps_the_home_replica_within_the_bound():
    from vrag_data.teacher.routing import route
    # home load 5, least 4: 5 <= 1.25 * 4 -> stays home
    assert route([5.0, 4.0, 6.0], [True, True, True], home=0, bound=1.25) == 0
    # home load 6 > 1.25 * 4 = 5 -> moves to the least loaded
    assert route([6.0, 4.0, 5.0], [True, True, True], home=0, bound=1.25) == 1
    # a looser bound keeps it home
    assert route([6.0, 4.0, 5.0], [True, True, True], home=0, bound=1.5) == 0


def test_route_without_home_or_with_a_full_home_takes_the_least_loaded_free_replica():
    from vrag_data.teacher.routing import route
    assert route([3.0, 1.0, 2.0], [True, True, True], home=None) == 1
    assert route([1.0, 1.0, 2.0], [False, True, True], home=0) == 1  # home full: moves
    assert route([1.0, 1.0], [False, False], home=0) is None  # nothing free: the caller waits
    assert route([1.0, 1.0, 1.0], [True, True, True], home=None, start=2) == 2  # ties rotate from start


def test_route_rejects_a_bound_below_one():
    from vrag_data.teacher.routing import route
    with pytest.raises(ValueError, match="bound"):
        route([1.0], [True], home=0, bound=0.9)


def test_affinity_table_counts_stays_and_moves():
    from vrag_data.teacher.routing import AffinityTable
    t = AffinityTable(max_keys=2)
    t.record("a", 0)
    t.record("a", 0)
    t.record("a", 1)
    t.record("b", 1)
    t.record("c", 0)  # forgets "a", the least recently used
    assert t.home("a") is None and t.home("b") == 1
    assert t.stats() == {"episodes": 2, "stays": 1, "moves": 1, "new": 3}


def test_affine_episode_stays_on_one_replica_and_moves_once_under_imbalance(tmp_path):
    from tests.support.prefix_cache_server import PrefixCacheFleet

    def turns(n: int) -> list[Message]:
        msgs = [Message(role="system", text="You are a teacher. " * 20)]
        for i in range(n):
            msgs.append(Message(role="user", text=f"turn {i}: look at the page and search again " * 10))
            if i < n - 1:
                msgs.append(Message(role="assistant", text="<search>next page</search>"))
        return msgs

    with PrefixCacheFleet(replicas=2, time_scale=0.05) as fleet:
        async def go():  # noqa: ANN202
            async with TeacherPool({"policy": role(*fleet.base_urls)}, RequestCache(tmp_path), "r1") as pool:
                first = [await pool.chat("policy", turns(t), affinity="ep1") for t in range(1, 4)]
                # three calls of the episode at once: the second finds its home 2 in flight vs 1 elsewhere
                burst = await asyncio.gather(*(pool.chat("policy", turns(3) + [Message(role="user", text=f"side {k}")],
                                                         affinity="ep1") for k in range(3)))
                after = await pool.chat("policy", turns(4), affinity="ep1")
                return first, burst, after, pool.stats()["affinity"]

        first, burst, after, aff = run(go())
        home = first[0].endpoint
        other = next(u for u in fleet.base_urls if u != home)
        assert [r.endpoint for r in first] == [home, home, home]
        assert [r.endpoint for r in burst] == [home, other, other]
        assert after.endpoint == other  # it moved once and stays on its new home
        assert aff == {"episodes": 1, "stays": 5, "moves": 1, "new": 1}
        st = fleet.stats()
        # every turn after the first found its history cached on the replica that served it
        by_url = dict(zip(fleet.base_urls, st["replicas"], strict=True))
        assert by_url[home]["requests"] == 4 and by_url[other]["requests"] == 3
        assert by_url[home]["cached_tokens"] > 0


def test_calls_without_affinity_still_spread_least_loaded(tmp_path):
    from tests.support.prefix_cache_server import PrefixCacheFleet
    with PrefixCacheFleet(replicas=2, time_scale=0.05) as fleet:
        res = run(_chat_all(TeacherPool({"policy": role(*fleet.base_urls)}, RequestCache(tmp_path), "r1"), [f"q{i}" for i in range(8)]))
        assert sorted(r["requests"] for r in fleet.stats()["replicas"]) == [4, 4]
        assert all(not r.cached for r in res)


def test_simulator_counts_image_tokens_and_caches_whole_blocks():
    from tests.support.prefix_cache_server import Replica, block_hashes, image_tokens

    assert image_tokens(784, 1008) == 28 * 36  # Qwen2.5-VL: one token per 28x28 pixels
    first, n1 = block_hashes([(b"role:user", 1), (b"a" * 4 * 39, 39)])  # 40 tokens -> 2 full blocks
    grown, n2 = block_hashes([(b"role:user", 1), (b"a" * 4 * 39, 39), (b"role:user", 1), (b"more", 10)])  # 51 -> 3
    other, _ = block_hashes([(b"role:user", 1), (b"b" * 4 * 39, 39)])
    assert (n1, len(first), n2, len(grown)) == (40, 2, 51, 3)
    assert grown[:2] == first and other[0] != first[0]
    rep = Replica(cache_tokens=1000)
    assert rep.lookup_and_insert(first) == 0
    assert rep.lookup_and_insert(grown) == 32  # the two blocks of the earlier prompt
    assert rep.lookup_and_insert(other) == 0


def test_a_reply_over_the_size_cap_is_a_recorded_error_not_a_memory_spike():
    import asyncio as _asyncio

    import pytest as _pytest

    from tests.support.openai_server import OpenAIServer as _Server
    from vrag_data.config import EndpointConfig as _EC
    from vrag_data.teacher.http import Endpoint, Fatal, post_chat

    body = b'{"model": "teacher", "messages": [{"role": "user", "content": "hi"}]}'
    with _Server(reply=["y" * 50_000]) as srv:
        async def go(cap):  # noqa: ANN001, ANN202
            ep = Endpoint("policy", 0, _EC(base_url=srv.base_url, model="teacher"), None)
            try:
                return await post_chat(ep, body, "rq_1", 10.0, max_reply_bytes=cap)
            finally:
                await ep.close()

        with _pytest.raises(Fatal, match="reply larger than"):
            _asyncio.run(go(10_000))
        text, *_ = _asyncio.run(go(1 << 20))
    assert text == "y" * 50_000


def test_check_names_every_wrong_model_in_one_line(tmp_path):
    """Three roles name models their servers do not serve: one line names all three with each fix, not the first only
    (a config is not fixed one run at a time)."""
    with OpenAIServer(models=["served-a"]) as a, OpenAIServer(models=["served-b"]) as b:
        roles = {"policy": RoleConfig(endpoints=[EndpointConfig(base_url=a.base_url, model="polcy")]),
                 "judge": RoleConfig(endpoints=[EndpointConfig(base_url=b.base_url, model="juge")]),
                 "question_writer": RoleConfig(endpoints=[EndpointConfig(base_url=b.base_url, model="served-b")])}
        pool = TeacherPool(roles, RequestCache(tmp_path), "r1")

        with pytest.raises(TeacherError) as err:
            run(_check(pool))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("2 wrong model names: ")
    assert "does not serve model 'polcy' (it serves ['served-a']); fix roles.policy.endpoints[0].model" in msg
    assert "does not serve model 'juge' (it serves ['served-b']); fix roles.judge.endpoints[0].model" in msg
