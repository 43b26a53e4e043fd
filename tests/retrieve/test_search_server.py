"""The search server over real HTTP: both VRAG-RL schemas, limits, page images, traversal, token."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from PIL import Image

from vrag_data.retrieve import build_index
from vrag_data.retrieve.server import ServerLimits, create_app
from vrag_data.schema.records import Page
from vrag_data.store import Workspace, write_records

TEXTS = {
    "report_a": ["Population survey of independents 2018", "Democrats who voted in the last election",
                 "Methodology and sample sizes"],
    "manual_b": ["Watch setup: pairing with a phone", "Battery life and charging the watch"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, app) -> None:  # noqa: ANN001
        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("search server did not start")
            time.sleep(0.02)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("server") / "ws"
    w = Workspace(str(root))
    (root / "pages").mkdir(parents=True)
    for stem, texts in TEXTS.items():
        pages = [Page(page_id=f"{stem}_{i}", doc_id=f"sha-{stem}", stem=stem, page=i,
                      image=f"pages/{stem}_{i}.jpg", width=64, height=80, dpi=72, text=t)
                 for i, t in enumerate(texts, start=1)]
        write_records(f"{w.corpus_table('pages')}/{stem}.parquet", pages, Page)
        for p in pages:
            Image.new("RGB", (64, 80), (10 * p.page, 100, 200)).save(root / p.image, "JPEG")
    # Files that must never be served: a non-page jpg beside the pages, and a page whose image is a
    # symlink to a file outside the workspace.
    (root / "pages" / "notes.jpg").write_bytes(b"private")
    outside = root.parent / "outside.jpg"
    outside.write_bytes(b"outside the workspace")
    (root / "pages" / "manual_b_2.jpg").unlink()
    os.symlink(outside, root / "pages" / "manual_b_2.jpg")
    build_index(w)
    return w


@pytest.fixture(scope="module")
def client(ws: Workspace) -> Iterator[httpx.Client]:
    limits = ServerLimits(max_queries=8, max_query_chars=200, max_top_k=5)
    with Served(create_app(ws, limits=limits)) as c:
        yield c


def test_get_search_vrag_rl_shape(client: httpx.Client, ws: Workspace) -> None:
    r = client.get("/search", params={"queries": ["democrats voted election", "battery charging"]})
    assert r.status_code == 200
    body = r.json()
    assert len(body) == 2 and all(len(hits) == 3 for hits in body)  # default top_k is 3, like the reference
    first = body[0][0]
    assert set(first) == {"idx", "image_file", "score", "doc_id", "page"}
    assert (first["idx"], first["doc_id"], first["page"]) == (0, "sha-report_a", 2)
    assert os.path.basename(first["image_file"]) == "report_a_2.jpg"
    assert Path(first["image_file"]).is_file()  # VRAG-RL clients open this path directly
    assert body[1][0]["doc_id"] == "sha-manual_b" and body[1][0]["page"] == 2
    assert [h["idx"] for h in body[1]] == [0, 1, 2]


def test_get_search_top_k_and_doc_scope(client: httpx.Client) -> None:
    r = client.get("/search", params={"queries": "watch", "top_k": 5, "doc_id": "report_a"})
    assert r.status_code == 200
    hits = r.json()[0]
    assert len(hits) == 3 and {h["doc_id"] for h in hits} == {"sha-report_a"}
    by_sha = client.get("/search", params={"queries": "watch", "top_k": 2, "doc_id": "sha-manual_b"}).json()[0]
    assert len(by_sha) == 2 and {h["doc_id"] for h in by_sha} == {"sha-manual_b"}


def test_get_and_post_share_one_response_model(client: httpx.Client) -> None:
    get = client.get("/search", params={"queries": ["methodology sample", "pairing phone"], "top_k": 2}).json()
    post = client.post("/search", json={"queries": ["methodology sample", "pairing phone"], "top_k": 2}).json()
    assert get == post and len(get) == 2
    assert set(get[0][0]) == {"idx", "image_file", "score", "doc_id", "page"}
    assert get[0][0]["image_file"].endswith("report_a_3.jpg") and [h["idx"] for h in get[0]] == [0, 1]
    one = client.post("/search", json={"query": "pairing phone", "top_k": 1}).json()
    assert one == client.get("/search", params={"query": "pairing phone", "top_k": 1}).json()
    spec = client.get("/openapi.json").json()
    assert "Hit" in spec["components"]["schemas"]


def test_post_search_engine_shape_when_asked(client: httpx.Client) -> None:
    r = client.post("/search", json={"queries": ["methodology sample", "pairing phone"], "top_k": 2, "format": "engine"})
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 2
    for entry in results:
        assert set(entry) == {"score", "indice", "data"}
        assert len(entry["score"]) == len(entry["indice"]) == len(entry["data"]) == 2
    assert results[0]["data"][0]["page_id"] == "report_a_3" and results[0]["data"][0]["type"] == "image"
    assert results[1]["data"][0]["page_id"] == "manual_b_1"
    assert results[0]["indice"][0] != results[1]["indice"][0]
    vrag = client.post("/search", json={"queries": ["pairing phone"], "top_k": 1, "vrag_ret": True}).json()
    assert vrag[0][0]["idx"] == 0 and vrag[0][0]["image_file"].endswith("manual_b_1.jpg")


@pytest.mark.parametrize(("request_kwargs", "message"), [
    ({"json": {"queries": ["a"], "top_k": 2, "unexpected": 1}}, "unexpected"),
    ({"json": {"top_k": 2}}, "queries"),
    ({"json": {"queries": "not a list"}}, "queries"),
    ({"json": {"queries": []}}, "queries"),
    ({"content": b"{not json", "headers": {"content-type": "application/json"}}, "JSON"),
    ({"json": {"queries": ["a"], "top_k": 6}}, "top_k must be between 1 and 5"),
    ({"json": {"queries": ["a"], "top_k": 0}}, "top_k must be between 1 and 5"),
    ({"json": {"queries": ["a"] * 9}}, "too many queries"),
    ({"json": {"queries": ["x" * 201]}}, "longer than 200"),
    ({"json": {"queries": ["a"], "doc_id": "missing"}}, "unknown doc_id"),
])
def test_post_malformed_gets_422_with_message(client: httpx.Client, request_kwargs: dict, message: str) -> None:
    r = client.post("/search", **request_kwargs)
    assert r.status_code == 422
    assert message.lower() in r.text.lower()


@pytest.mark.parametrize(("params", "message"), [
    ({}, "at least one query"),
    ({"queries": "a", "top_k": "many"}, "top_k"),
    ({"queries": "a", "top_k": 99}, "top_k must be between"),
    ({"queries": ["a"] * 9}, "too many queries"),
])
def test_get_malformed_gets_422(client: httpx.Client, params: dict, message: str) -> None:
    r = client.get("/search", params=params)
    assert r.status_code == 422 and message in r.text


def test_page_images_served_and_nothing_else(client: httpx.Client, ws: Workspace) -> None:
    r = client.get("/pages/report_a_1.jpg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.content == Path(ws.page_image("report_a_1")).read_bytes()
    assert client.get("/healthz").json() == {"status": "ok", "pages": 5, "documents": 2}
    for raw in ["/pages/notes.jpg", "/pages/report_a_9.jpg", "/pages/report_a_1.png", "/pages/report_a_1",
                "/pages/manual_b_2.jpg",  # an indexed page whose file is a symlink leaving the workspace
                "/pages/..%2F..%2Foutside.jpg", "/pages/..%2Fcorpus%2Fpages%2Freport_a.parquet",
                "/pages/%2Fetc%2Fpasswd", "/pages/..%252F..%252Fetc%252Fpasswd", "/pages/%2e%2e%2fnotes.jpg",
                "/pages/../corpus/pages/report_a.parquet", "/pages//etc/passwd"]:
        resp = client.get(httpx.URL(f"{client.base_url}").copy_with(raw_path=raw.encode()))
        assert resp.status_code in (404, 422), (raw, resp.status_code)
        assert b"outside the workspace" not in resp.content and b"private" not in resp.content


def test_bearer_token(ws: Workspace) -> None:
    with Served(create_app(ws, token="s3cret", image_file="name")) as c:
        assert c.get("/search", params={"queries": "watch"}).status_code == 401
        wrong = c.get("/search", params={"queries": "watch"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert c.get("/pages/report_a_1.jpg").status_code == 401
        ok = c.get("/search", params={"queries": "watch"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()[0][0]["image_file"] == "manual_b_1.jpg"
        assert c.get("/healthz").status_code == 200


@pytest.mark.slow
def test_malformed_parameters_are_4xx_and_the_token_guards_every_route(tmp_path_factory):
    import json as _json

    from fastapi.testclient import TestClient

    from tests.support.synth_workspace import sample_workspace
    from vrag_data.retrieve.server import create_app
    from vrag_data.store import Workspace

    ws = Workspace(str(sample_workspace(tmp_path_factory.getbasetemp())))
    c = TestClient(create_app(ws))
    nan = c.post("/search", content=_json.dumps({"queries": ["revenue"], "top_k": float("nan")}),
                 headers={"content-type": "application/json"})
    assert nan.status_code == 422
    assert c.get("/search", params={"queries": "revenue", "top_k": "NaN"}).status_code == 422
    assert c.get("/search", params={"queries": "   "}).status_code == 422  # an empty query is not a search
    assert c.post("/search", json={"query": "revenue"}).status_code == 200  # `query` as well as `queries`
    assert c.get("/search", params={"query": "revenue"}).json() == c.get("/search", params={"queries": "revenue"}).json()
    guarded = TestClient(create_app(ws, token="s3cret-token"))
    for path in ("/docs", "/openapi.json", "/search?queries=revenue"):
        assert guarded.get(path).status_code == 401, path
        assert guarded.get(path, headers={"Authorization": "Bearer s3cret-token"}).status_code == 200, path
    assert guarded.get("/healthz").status_code == 200


@pytest.mark.slow
def test_a_taken_port_is_one_line_and_exit_2(tmp_path_factory):
    import socket

    from typer.testing import CliRunner

    from tests.support.synth_workspace import sample_workspace
    from vrag_data.cli.main import app

    ws = sample_workspace(tmp_path_factory.getbasetemp())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = CliRunner().invoke(app, ["serve-search", "-w", str(ws), "--port", str(port)])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and str(port) in lines[0] and "search server on" not in r.output
