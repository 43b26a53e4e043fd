"""Search server compatible with VRAG-RL clients (FastAPI; bind it to loopback).

- `GET /search?queries=a&queries=b[&top_k=3][&doc_id=..]` (`query=` works as well) -> one list per query of
  `Hit` = `{idx, image_file, score, doc_id, page}` (VRAG-RL's shape, as is). VRAG-RL's rollout loop calls this with only `queries` (batches of
  up to 100) and opens `image_file` as a local path, keeping the first image it has not shown before; so
  `image_file` is the page image's path on this machine by default (its basename is `<stem>_<page>.jpg`, the
  name VRAG-RL matches gold pages on), or just the basename with `image_file="name"` (fetch it from
  `/pages/{name}`). `idx` is the rank in the list (0 = best), as in the reference server's `vrag_ret` output.
- `POST /search` with `{queries | query, top_k?, doc_id?}` -> the same lists of `Hit` as GET (one response model for
  both, in /openapi.json). Only with `format: "engine"` it returns the reference engine's `search()` shape instead:
  `{results: [{score: [k floats], indice: [k page numbers in the index], data: [{type: "image", file_path, page_id,
  doc_id, page}]}]}`. `vrag_ret` (the reference API's switch to the GET shape) is accepted; that shape is the default.
- `GET /pages/{name}` serves `<page_id>.jpg` for pages of the index only; `GET /healthz`.
- `doc_id` accepts a document's sha256 id or its file stem and restricts the search to that document.
Limits (queries per request, query length, top_k) give 422 with a message; so does any malformed request.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from vrag_data.retrieve.base import Searcher, SearchHit
from vrag_data.retrieve.bm25 import UnknownDocument
from vrag_data.retrieve.build import load_index
from vrag_data.store import Workspace

ImageFileMode = Literal["path", "name"]


class ServerLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_queries: int = 256
    max_query_chars: int = 2048
    max_top_k: int = 100
    default_top_k: int = 3  # the reference server's default


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    queries: list[str] = Field(default_factory=list)
    query: str | list[str] | None = None  # accepted as well as `queries`
    top_k: int | None = None
    doc_id: str | None = None
    vrag_ret: bool = False  # the reference API's switch to its GET shape: that shape is the default here
    format: Literal["hits", "engine"] = "hits"  # "engine": the reference search engine's {results: ...} instead


class Hit(BaseModel):
    """One search hit: the response model of GET and POST /search (a list of these per query)."""

    idx: int = Field(description="rank in the list, 0 = best")
    image_file: str = Field(description="the page image: a path on this machine, or its name (image_file='name')")
    score: float
    doc_id: str = Field(description="the document's sha256 id")
    page: int = Field(description="1-based page number")


def _page_ids(searcher: Searcher) -> dict[str, tuple[str, str, int]]:
    pages = getattr(searcher, "pages", None)
    if pages is None:
        raise TypeError("the searcher must expose `pages` (PageMeta list) to serve page images")
    return {p.page_id: (p.doc_id, p.stem, p.page) for p in pages}


def _guard(app: FastAPI, token: str | None) -> Callable[[Request], None]:
    """422s that name each bad parameter without echoing inputs; with a token, every route but /healthz needs it
    (/docs and /openapi.json included). Returns the per-route token check."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # inputs are not echoed (a NaN or a huge body could not be rendered)
        detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    if token is not None:
        @app.middleware("http")
        async def _every_route_needs_the_token(request: Request, call_next: Any) -> Any:
            got = request.headers.get("authorization", "")
            if request.url.path != "/healthz" and not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
                return JSONResponse(status_code=401, content={"detail": "missing or wrong bearer token"},
                                    headers={"WWW-Authenticate": "Bearer"})
            return await call_next(request)

    def check_token(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    return check_token


def _checked_query(queries: list[str], top_k: int | None, limits: ServerLimits) -> int:
    """The request's top_k (the default when unset), after every bound a query is held to (a 422 naming the first)."""
    k = limits.default_top_k if top_k is None else top_k
    if not queries:
        raise HTTPException(422, "give at least one query (queries=... or query=...)")
    if any(not q.strip() for q in queries):
        raise HTTPException(422, "empty query: every query needs at least one word")
    if len(queries) > limits.max_queries:
        raise HTTPException(422, f"too many queries: {len(queries)} > {limits.max_queries} per request")
    too_long = [i for i, q in enumerate(queries) if len(q) > limits.max_query_chars]
    if too_long:
        raise HTTPException(422, f"query {too_long[0]} is longer than {limits.max_query_chars} characters")
    if not 1 <= k <= limits.max_top_k:
        raise HTTPException(422, f"top_k must be between 1 and {limits.max_top_k}, got {k}")
    return k


def create_app(ws: Workspace, token: str | None = None, searcher: Searcher | None = None,
               limits: ServerLimits | None = None, image_file: ImageFileMode = "path") -> FastAPI:
    """The search API over `ws`'s index (opened now, so a missing index fails at start, not per request)."""
    searcher = searcher or load_index(ws)
    limits = limits or ServerLimits()
    pages = _page_ids(searcher)
    page_index = {pid: i for i, pid in enumerate(pages)}
    stems = {stem for _, stem, _ in pages.values()}
    stem_of_doc = {doc_id: stem for doc_id, stem, _ in pages.values()}
    pages_dir = os.path.realpath(ws.pages) if ws.is_local else ws.pages
    if image_file == "path" and not ws.is_local:
        image_file = "name"  # a remote workspace has no local path to hand out

    app = FastAPI(title="vrag-data search", version="1")
    check_token = _guard(app, token)

    def run(queries: list[str], top_k: int | None, doc_id: str | None) -> list[list[SearchHit]]:
        k = _checked_query(queries, top_k, limits)
        stem = None
        if doc_id is not None:
            stem = doc_id if doc_id in stems else stem_of_doc.get(doc_id)
            if stem is None:
                raise HTTPException(422, f"unknown doc_id {doc_id!r}: give a document id or file stem in the index")
        try:
            return searcher.search(queries, top_k=k, doc_stem=stem)
        except UnknownDocument as err:
            raise HTTPException(422, str(err)) from None

    def file_of(hit: SearchHit) -> str:
        return os.path.join(pages_dir, hit.image_file) if image_file == "path" else hit.image_file

    def short_list(hits: list[SearchHit]) -> list[dict]:
        return [Hit(idx=i, image_file=file_of(h), score=h.score, doc_id=h.doc_id, page=h.page).model_dump()
                for i, h in enumerate(hits)]

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok", "pages": len(pages), "documents": len(stems)}

    @app.get("/search", dependencies=[Depends(check_token)], response_model=list[list[Hit]])
    def search_get(queries: list[str] = Query(default=[]), query: list[str] = Query(default=[]), top_k: int | None = None,
                   doc_id: str | None = None) -> list[list[dict]]:
        return [short_list(h) for h in run([*queries, *query], top_k, doc_id)]

    @app.post("/search", dependencies=[Depends(check_token)], response_model=list[list[Hit]] | dict[str, Any])
    def search_post(body: SearchBody) -> dict | list:
        extra = [body.query] if isinstance(body.query, str) else list(body.query or [])
        results = run([*body.queries, *extra], body.top_k, body.doc_id)
        if body.format == "hits":  # the same shape as GET
            return [short_list(h) for h in results]
        return {"results": [{
            "score": [h.score for h in hits],
            "indice": [page_index[h.page_id] for h in hits],
            "data": [{"type": "image", "file_path": file_of(h), "page_id": h.page_id, "doc_id": h.doc_id,
                      "page": h.page} for h in hits],
        } for hits in results]}

    @app.get("/pages/{name}", dependencies=[Depends(check_token)])
    def page_image(name: str) -> Response:
        # Only names of indexed pages are served; the name never reaches the filesystem unchecked.
        pid = name[: -len(".jpg")] if name.endswith(".jpg") else None
        if pid is None or pid not in pages:
            raise HTTPException(404, "no such page image")
        if not ws.is_local:
            with ws.fs.open(ws.page_image(pid), "rb") as f:
                return Response(f.read(), media_type="image/jpeg")
        path = os.path.realpath(os.path.join(pages_dir, f"{pid}.jpg"))
        if os.path.dirname(path) != pages_dir or not os.path.isfile(path):
            raise HTTPException(404, "no such page image")  # missing, or a symlink leading elsewhere
        return FileResponse(path, media_type="image/jpeg")

    return app
