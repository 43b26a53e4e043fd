"""The search server as a user starts it (`vrag-data serve-search` in its own process) under hostile
clients: path traversal in every spelling, very long and very many queries, unknown fields and wrong
types, a few thousand concurrent requests; it listens on 127.0.0.1 only and enforces its bearer token."""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
import httpx
import pytest

from tests.support.synth_workspace import sample_workspace

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TOKEN = "search-token-for-tests"
SECRET = b"TOP-SECRET-OUTSIDE-THE-CORPUS-41c9"
N_LOAD, IN_FLIGHT = 3000, 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("search")
    ws = base / "ws"
    shutil.copytree(sample_workspace(tmp_path_factory.getbasetemp()), ws, ignore=shutil.ignore_patterns("runs", "exports"))
    (base / "secret.txt").write_bytes(SECRET)
    # a page image replaced by a symlink that leads out of the corpus
    victim = sorted((ws / "pages").glob("*.jpg"))[-1]
    victim.unlink()
    victim.symlink_to(base / "secret.txt")
    port = _free_port()
    env = {**os.environ, "VRAG_TEST_SEARCH_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "vrag_data.cli.main", "serve-search", "-w", str(ws), "--port", str(port),
                             "--token-env", "VRAG_TEST_SEARCH_TOKEN", "--image-file", "name"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "search server did not start"
        time.sleep(0.1)
    try:
        yield {"url": url, "port": port, "ws": ws, "victim": victim.name, "proc": proc}
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_listens_on_loopback_only(server):
    tcp = Path("/proc/net/tcp")
    if not tcp.is_file():
        pytest.skip("needs /proc/net/tcp (Linux) to read listening sockets")
    port_hex = f"{server['port']:04X}"
    listening = [line.split()[1] for line in tcp.read_text().splitlines()[1:] if line.split()[3] == "0A"]
    mine = [a for a in listening if a.endswith(":" + port_hex)]
    assert mine == ["0100007F:" + port_hex], mine  # 127.0.0.1, not 0.0.0.0
    v6 = Path("/proc/net/tcp6")
    if v6.is_file():
        assert not [ln for ln in v6.read_text().splitlines()[1:] if ln.split()[1].endswith(":" + port_hex) and ln.split()[3] == "0A"]


def test_bearer_token_is_required(server):
    url = server["url"]
    assert httpx.get(url + "/search", params={"queries": "revenue"}).status_code == 401
    assert httpx.get(url + "/search", params={"queries": "revenue"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(url + "/search", json={"queries": ["revenue"]}, headers={"Authorization": TOKEN}).status_code == 401
    ok = httpx.get(url + "/search", params={"queries": "revenue"}, headers=_auth())
    assert ok.status_code == 200 and ok.json()[0]
    name = ok.json()[0][0]["image_file"]
    assert httpx.get(f"{url}/pages/{name}").status_code == 401
    for path in ("/docs", "/openapi.json", "/redoc"):  # every route but /healthz needs the token
        assert httpx.get(url + path).status_code == 401, path
    assert httpx.get(url + "/openapi.json", headers=_auth()).status_code == 200
    assert httpx.get(url + "/healthz").status_code == 200


def _raw_get(port: int, path: str) -> tuple[int, bytes]:
    """Send `path` byte for byte (clients such as httpx normalise '..' away before sending)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=False, skip_accept_encoding=True)
        for k, v in _auth().items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_no_file_outside_the_corpus_is_served(server):
    port, ws = server["port"], server["ws"]
    secret = str(ws.parent / "secret.txt")
    some_page = sorted(p.name for p in (ws / "pages").glob("*.jpg") if p.name != server["victim"])[0]
    attempts = [
        "/pages/../secret.txt", "/pages/../../secret.txt", "/pages/..%2fsecret.txt", "/pages/..%2F..%2Fsecret.txt",
        "/pages/%2e%2e/secret.txt", "/pages/%2e%2e%2fsecret.txt", "/pages/..%5csecret.txt", "/pages/....//secret.txt",
        f"/pages/{secret}", f"/pages/{secret.replace('/', '%2f')}", "/pages//etc/passwd", "/pages/%2fetc%2fpasswd",
        f"/pages/{some_page}/../../secret.txt", f"/pages/{some_page}%00.txt", f"/pages/{some_page}%2f..%2f..%2fsecret.txt",
        "/pages/.jpg", "/pages/..jpg", "/pages/%00", "/../secret.txt", "/pages/" + "../" * 30 + "etc/passwd",
        f"/pages/{server['victim']}",  # a corpus page name whose file is a symlink leading outside
        f"/search?queries={secret}", "/static/../secret.txt", "/docs/../../secret.txt",
    ]
    for path in attempts:
        status, body = _raw_get(port, path)
        assert SECRET not in body, f"{path} served the secret file"
        assert b"root:" not in body, f"{path} served /etc/passwd"
        if path.startswith("/pages/"):
            assert status in (400, 404), (path, status)
        else:
            assert status < 500, (path, status)
    status, body = _raw_get(port, f"/pages/{some_page}")
    assert status == 200 and body[:2] == b"\xff\xd8"  # the legitimate page is still served


def test_long_many_and_malformed_queries_get_clear_4xx(server):
    url, h = server["url"], _auth()
    cases = [
        ("POST", {"json": {"queries": ["x" * 1_000_000]}}, 422, "longer than"),
        ("POST", {"json": {"queries": ["revenue"] * 100_000}}, 422, "too many queries"),
        ("POST", {"json": {"queries": ["revenue"], "bogus": 1}}, 422, "bogus"),
        ("POST", {"json": {"queries": "revenue", "top_k": "many"}}, 422, "top_k"),
        ("POST", {"json": {"queries": ["revenue"], "top_k": 10**9}}, 422, "top_k"),
        ("POST", {"json": {"queries": ["revenue"], "top_k": -1}}, 422, "top_k"),
        ("POST", {"json": {"queries": []}}, 422, "queries"),
        ("POST", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 422, ""),
        ("POST", {"content": b"\xff\xfe\x00garbage", "headers": {"Content-Type": "application/json"}}, 422, ""),
        ("POST", {"json": {"queries": ["revenue"], "doc_id": "../../etc/passwd"}}, 422, "unknown doc_id"),
        ("GET", {"params": [("queries", "q")] * 1000}, 422, "too many queries"),
        ("GET", {"params": {"queries": "y" * 5000}}, 422, "longer than"),
        ("GET", {"params": {"queries": "revenue", "top_k": "0"}}, 422, "top_k"),
    ]
    with httpx.Client(timeout=30) as c:
        for method, kw, want, words in cases:
            headers = {**h, **kw.pop("headers", {})}
            r = c.request(method, url + "/search", headers=headers, **kw)
            assert r.status_code == want, (method, str(kw)[:120], r.status_code, r.text[:200])
            assert words.lower() in r.text.lower(), (words, r.text[:300])
        # a URL far beyond any sane length is refused by the HTTP layer, not answered with a 5xx or a hang
        status, _ = _raw_get(server["port"], "/search?queries=" + "z" * 200_000)
        assert 400 <= status < 500
    assert server["proc"].poll() is None  # still up


async def _load(url: str, n: int, in_flight: int) -> tuple[Counter[int], list[float], dict[str, list]]:
    """n requests, a tenth of them invalid, at most `in_flight` at once; statuses, latencies, answers."""
    sem = asyncio.Semaphore(in_flight)
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    answers: dict[str, list] = {}
    queries = ["revenue", "net income 2020", "robotics slides", "Zephyra analytics", "operating margin"]
    timeout = aiohttp.ClientTimeout(total=60)  # the bound: a request slower than this fails the test

    async with aiohttp.ClientSession(headers=_auth(), timeout=timeout) as s:
        async def one(i: int) -> None:
            q = queries[i % len(queries)]
            async with sem:
                t0 = time.perf_counter()
                if i % 10 == 9:  # invalid: too many queries
                    async with s.post(url + "/search", json={"queries": [q] * 300}) as r:
                        await r.read()
                        statuses[r.status] += 1
                elif i % 2:
                    async with s.post(url + "/search", json={"queries": [q], "top_k": 3, "vrag_ret": True}) as r:
                        answers.setdefault(q, []).append(await r.json())
                        statuses[r.status] += 1
                else:
                    async with s.get(url + "/search", params={"queries": q, "top_k": "3"}) as r:
                        answers.setdefault(q, []).append(await r.json())
                        statuses[r.status] += 1
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(i) for i in range(n)))
    return statuses, latencies, answers


@pytest.mark.soak  # `make test-soak`: a load test (thousands of requests), not a check of one behaviour
def test_a_few_thousand_concurrent_requests_all_answered_correctly(server):
    statuses, latencies, answers = asyncio.run(_load(server["url"], N_LOAD, IN_FLIGHT))
    assert statuses == Counter({200: N_LOAD - N_LOAD // 10, 422: N_LOAD // 10}), statuses
    for q, got in answers.items():
        assert all(a == got[0] for a in got), f"answers for {q!r} differ under load"
        assert got[0] and got[0][0], q
    assert len(latencies) == N_LOAD
    assert server["proc"].poll() is None
