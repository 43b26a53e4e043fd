"""The pages an RL episode may retrieve, for an export that is used away from its workspace.

RL prompts of the multi-turn recipes carry no pages: the rollout searches. With `search_pages: copy` the export holds
`search/index/` (the workspace's index, as built) and `search/pages/<page_id>.jpg` (every page the index returns), a
folder `vrag-data serve-search -w search` serves as it serves a workspace; a hit's image file is named by its page
id, the id the reward's `gold_pages` and `search_results` use. With `recipe` only `search/README.md` is written: how
to serve them from the workspace.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from fsspec.core import url_to_fs

from vrag_data.errors import VragError
from vrag_data.export.io import write_text
from vrag_data.retrieve.build import load_index
from vrag_data.store import Workspace

SEARCH_DIR = "search"
_SAFE_ID = re.compile(r"[\w .\-]+")
_UNSAFE_CHAR = re.compile(r"[^\w .\-]")  # what a page id (`<file stem>_<page>`) may hold to be copied into an export


def _howto(served: str) -> str:
    return (
        "# Serving the pages of this export's RL episodes\n\n"
        f"Start the search API over {served}, then point the rollout's search tool at it:\n\n"
        "```bash\n"
        f"vrag-data serve-search -w {'search' if served.startswith('`search/`') else '<workspace>'} --port 8002\n"
        "curl 'http://127.0.0.1:8002/search?queries=revenue%202017&top_k=3'\n"
        "```\n\n"
        "Each hit's `image_file` ends in `<page_id>.jpg`: the page ids the rows' `extra_info.gold_pages` name. "
        "A rollout passes the page ids it retrieved to the reward as `extra_info.search_results` (one list per "
        "search, rank order; the row holds it empty and the reward refuses a row without it), optionally with "
        "`retrieved_pages`; VISOR's retrieval reward and the NDCG terms read them.\n"
    )


def write_search(ws: Workspace, out: Path, mode: str, warn: Callable[[str], None]) -> dict[str, int | str]:
    """`search/` for `mode` ("copy" or "recipe"); returns what the summary records (mode, pages copied, bytes). A
    workspace without an index gets the recipe, with a warning that says how to build one."""
    folder = out / SEARCH_DIR
    searcher = None
    if mode == "copy":
        try:
            searcher = load_index(ws)
        except VragError as err:
            warn(f"search/: {err}; the export holds only how to serve the pages (export.search_pages: recipe)")
            mode = "recipe"
    page_ids = [p.page_id for p in getattr(searcher, "pages", [])] if searcher is not None else []
    unsafe = [pid for pid in page_ids if not _SAFE_ID.fullmatch(pid)]
    if unsafe:
        # page ids are the documents' file names: a name carrying markup or control characters must not travel into
        # an export (a trainer's tools and logs read these names); the rows never carry them either
        shown = _UNSAFE_CHAR.sub("?", unsafe[0][:40])
        warn(f"search/: {len(unsafe)} page id(s) from file names with characters unsafe in an export (e.g. "
             f"{shown!r}); the export holds only how to serve the pages from the workspace; "
             "rename those files (letters, digits, . _ - and spaces) and re-ingest to ship the pages")
        searcher, mode = None, "recipe"
    if searcher is None:
        write_text(out, folder / "README.md", _howto(f"the workspace `{ws.root}` (its `index/` and `pages/`)"))
        return {"mode": mode, "pages": 0, "bytes": 0}
    fs, base = url_to_fs(ws.index)
    n_bytes = 0
    for src in fs.find(base):
        dest = folder / "index" / posixpath.relpath(src, base)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(src, str(dest))
        n_bytes += dest.stat().st_size
    (folder / "pages").mkdir(parents=True, exist_ok=True)
    for pid in page_ids:
        src = ws.page_image(pid)
        if not fs.exists(src):
            raise VragError(f"{src}: page image missing, the index returns it; re-run ingest for this document")
        dest = folder / "pages" / f"{pid}.jpg"
        if not dest.exists():
            fs.get_file(src, str(dest))
        n_bytes += dest.stat().st_size
    write_text(out, folder / "README.md", _howto("`search/` (this export's copy of the index and its pages)"))
    return {"mode": mode, "pages": len(page_ids), "bytes": n_bytes}
