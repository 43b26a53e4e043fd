"""MinerU layout adapter. MinerU pins against this environment, so it always runs out of process: a Python
interpreter of its own environment (`VRAG_MINERU_PYTHON`, local models under `MINERU_HOME`) or a MinerU API
server (`VRAG_MINERU_URL`). When neither is usable the run stops at once; it never falls back to PyMuPDF.

MinerU 4 returns "middle JSON": `pages[].blocks[]` with a `type`, a 0-1 normalised `bbox` and `content`
(spans, or child blocks for image/table/chart/code containers). `mineru_page_blocks` turns one page of it
into our LayoutBlocks (raw pixels of our rendered page + 0-1000).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from vrag_data.errors import MissingComponent, VragError
from vrag_data.ingest.backends import DocumentPage, LayoutBackend, register_backend
from vrag_data.ingest.geometry import clamp
from vrag_data.ingest.options import IngestOptions, MinerUSettings
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, LayoutClass

TYPE_MAP: dict[str, LayoutClass] = {
    "text": "text", "list": "list", "index": "text", "ref_text": "text", "aside_text": "text",
    "page_footnote": "text", "doc_title": "title", "title": "title", "paragraph_title": "title",
    "image_body": "figure", "image_caption": "caption", "image_footnote": "text",
    "table_body": "table", "table_caption": "caption", "table_footnote": "text",
    "chart_body": "chart", "chart_caption": "caption", "chart_footnote": "text",
    "code_body": "text", "algorithm_body": "text", "code_caption": "caption", "code_footnote": "text",
    "equation": "formula", "interline_equation": "formula",
    "header": "header", "footer": "footer", "page_number": "footer",
}
CONTAINERS = {"image": "image_body", "table": "table_body", "chart": "chart_body", "code": "code_body"}
FIX = "use --layout pymupdf"

# Run inside MinerU's environment (a file, not `-c`: MinerU starts worker processes with "spawn").
_DRIVER = '''
import json, sys
from mineru.parser import parse
if __name__ == "__main__":
    path, tier, pages, out = sys.argv[1:5]
    result = parse(path, tier=tier, page_range=pages)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result.to_dict(), f, ensure_ascii=False, default=str)
'''


MinerUPage = DocumentPage  # what MinerU found on one page


def span_text(content: Any) -> str:
    """Flatten MinerU span content (strings, spans, hyperlinks with nested spans) into plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(span_text(c) for c in content)
    if isinstance(content, dict):
        if isinstance(content.get("bbox"), (list, tuple)) and content.get("type") in TYPE_MAP:
            return ""  # a child block, not a span
        for key in ("content", "text", "html", "latex"):
            if key in content:
                return span_text(content[key])
    return ""


def norm_box(bbox: Any, width: int, height: int) -> Box:
    """MinerU 4 boxes are 0-1; older MinerU and its VLM speak 0-1000. Both map onto our page pixels."""
    x0, y0, x1, y1 = (float(v) for v in bbox)
    unit = 1000.0 if max(x0, y0, x1, y1) > 1.5 else 1.0
    raw = clamp((x0 / unit * width, y0 / unit * height, x1 / unit * width, y1 / unit * height), width, height)
    return Box.from_raw(raw, width, height)


def _flatten(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        kind = str(b.get("type", ""))
        children = [c for c in b.get("content") or [] if isinstance(c, dict) and c.get("bbox") and c.get("type") in TYPE_MAP]
        if kind in CONTAINERS and children:
            out.extend(children)
        elif kind in CONTAINERS:
            out.append({**b, "type": CONTAINERS[kind]})
        else:
            out.append(b)
    return out


def mineru_page_blocks(page: dict[str, Any], width: int, height: int, page_no: int) -> MinerUPage:
    """One page of MinerU middle JSON -> layout blocks, table texts and headings (pure)."""
    res = MinerUPage()
    for b in _flatten(page.get("blocks") or []):
        kind = str(b.get("type", ""))
        if not b.get("bbox"):
            continue
        cls = TYPE_MAP.get(kind, "other")
        text = " ".join(span_text(b.get("content")).split()) if cls != "table" else span_text(b.get("content")).strip()
        res.blocks.append(LayoutBlock(block_id="", doc_id="", page_id="", page=page_no, cls=cls,
                                      bbox=norm_box(b["bbox"], width, height), text=text, source="mineru"))
        if cls == "table" and text:
            res.tables_md.append(text)
        if cls == "title" and text:
            level = 1 if kind == "doc_title" else int(b.get("level") or 2)
            res.headings.append((page_no, level, text))
    return res


def _resolve(settings: MinerUSettings) -> tuple[str | None, str | None]:
    return settings.python or os.environ.get("VRAG_MINERU_PYTHON") or None, settings.url or os.environ.get("VRAG_MINERU_URL") or None


def check_mineru(settings: MinerUSettings) -> None:
    """Fail at once, in one line, when MinerU cannot run as configured."""
    python, url = _resolve(settings)
    if url:
        import httpx

        try:
            httpx.get(url.rstrip("/") + "/docs", timeout=10)
        except httpx.HTTPError as err:
            raise MissingComponent(f"MinerU server not reachable at {url} ({type(err).__name__}); start it or {FIX}") from None
        return
    if not python:
        raise MissingComponent(
            f"--layout mineru needs MinerU in its own environment: set VRAG_MINERU_PYTHON to its python "
            f"(or VRAG_MINERU_URL to a MinerU API server); or {FIX}"
        )
    if not Path(python).is_file():
        raise MissingComponent(f"VRAG_MINERU_PYTHON={python} does not exist; point it at MinerU's python or {FIX}")
    probe = subprocess.run([python, "-c", "import mineru.parser"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise MissingComponent(f"{python} cannot import mineru.parser (install mineru in that environment) or {FIX}")
    if settings.tier != "flash":
        home = os.environ.get("MINERU_HOME")
        models = Path(home) / "models" if home else None
        if models is None or not models.is_dir() or not any(models.iterdir()):
            raise MissingComponent(
                f"MinerU tier '{settings.tier}' needs local models under MINERU_HOME/models "
                f"({'MINERU_HOME not set' if not home else f'none in {models}'}); use --mineru-tier flash (text layer only) or {FIX}"
            )


def _run_local(python: str, path: str, n_pages: int, settings: MinerUSettings) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vrag-mineru-") as tmp:
        driver, out = Path(tmp) / "drive_mineru.py", Path(tmp) / "out.json"
        driver.write_text(_DRIVER)
        proc = subprocess.run(
            [python, str(driver), path, settings.tier, f"1-{n_pages}", str(out)],
            capture_output=True, text=True, timeout=settings.timeout_s, cwd=tmp,
        )
        if proc.returncode != 0 or not out.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise VragError(f"MinerU failed (exit {proc.returncode}): {last[:300]}")
        return json.loads(out.read_text(encoding="utf-8"))


def _find_middle(obj: Any) -> dict[str, Any] | None:
    """The server wraps middle JSON in its task result; find the dict whose `pages` hold `blocks`."""
    if isinstance(obj, dict):
        pages = obj.get("pages")
        if isinstance(pages, list) and (not pages or isinstance(pages[0], dict) and "blocks" in pages[0]):
            return obj
        items = list(obj.values())
    elif isinstance(obj, list):
        items = obj
    else:
        return None
    for v in items:
        if isinstance(v, str) and v.lstrip().startswith("{") and '"pages"' in v:
            try:
                v = json.loads(v)
            except ValueError:
                continue
        found = _find_middle(v)
        if found is not None:
            return found
    return None


def _run_server(url: str, path: str, n_pages: int, settings: MinerUSettings) -> dict[str, Any]:
    import httpx

    params = {"tier": settings.tier, "page_range": f"1-{n_pages}", "output_formats": "middle_json", "response_format": "json"}
    with open(path, "rb") as f:
        resp = httpx.post(url.rstrip("/") + "/v1/file_parse", params=params, files={"files": (Path(path).name, f)},
                          timeout=settings.timeout_s)
    if resp.status_code >= 400:
        raise VragError(f"MinerU server {url} answered {resp.status_code}: {resp.text[:200]}")
    middle = _find_middle(resp.json())
    if middle is None:
        raise VragError(f"MinerU server {url} returned no middle JSON pages")
    return middle


def run_mineru(path: str, sizes: dict[int, tuple[int, int]], settings: MinerUSettings) -> dict[int, MinerUPage]:
    """Layout for the rendered pages of one PDF, keyed by 1-based page number."""
    python, url = _resolve(settings)
    if not sizes:
        return {}
    n = max(sizes)
    middle = _run_server(url, path, n, settings) if url else _run_local(python or "", path, n, settings)
    out: dict[int, MinerUPage] = {}
    for page in middle.get("pages") or []:
        pno = int(page.get("page_idx", -1)) + 1
        if pno in sizes:
            out[pno] = mineru_page_blocks(page, *sizes[pno], pno)
    return out


class MineruLayout(LayoutBackend):
    """MinerU once per PDF, out of process (a local install or a server: `ingest.mineru`)."""

    name = "mineru"
    block_sources = {"mineru": 1}
    per_document = True

    def check(self, opts: IngestOptions) -> None:
        check_mineru(opts.mineru)

    def hash_keys(self, opts: IngestOptions) -> dict[str, Any]:
        return {"mineru_tier": opts.mineru.tier}

    def document_layout(self, path: str, sizes: dict[int, tuple[int, int]], opts: IngestOptions) -> dict[int, MinerUPage]:
        return run_mineru(path, sizes, opts.mineru)


register_backend(MineruLayout)
