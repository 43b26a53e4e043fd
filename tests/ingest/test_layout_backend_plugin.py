"""Layout backends as plugins: a backend defined outside the ingest (here, in this test) is one class and one
registration line; `ingest.layout` names it, its blocks land in the workspace under the source it declares, and
question generation ranks that source where the backend says. A block source no registered backend declares stops
question generation with one line (it was ranked last, silently), and an unknown backend name is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from vrag_data.errors import VragError
from vrag_data.ingest import backends as backend_registry
from vrag_data.ingest.backends import LayoutBackend, PageLayout, RawBlock, get_backend, known_backends, register_backend
from vrag_data.ingest.options import IngestOptions
from vrag_data.ingest.pipeline import check_components, ingest_paths
from vrag_data.qgen.evidence import page_regions
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock
from vrag_data.store.corpus import load_layout, load_pages
from vrag_data.store.workspace import Workspace

TABLE_RECT = (72.0, 300.0, 400.0, 420.0)  # PDF points: where the test PDF draws its "table"


class RuledTables(LayoutBackend):
    """Every page's ruled rectangle (the largest drawing) is a table whose text is what lies inside it."""

    name = "ruled_tables"
    block_sources = {"ruled": 0}  # more structured than anything shipped
    per_page = True
    needs_words = True

    def page_layout(self, page: Any, words: list) -> PageLayout:
        rects = [d["rect"] for d in page.get_drawings() if d.get("rect") is not None]
        if not rects:
            return PageLayout()
        r = max(rects, key=lambda x: x.width * x.height)
        text = page.get_text("text", clip=r).strip()
        return PageLayout(blocks=[RawBlock(rect=(r.x0, r.y0, r.x1, r.y1), cls="table", source="ruled", text=text)])


@pytest.fixture
def ruled_tables():
    register_backend(RuledTables)
    yield RuledTables
    backend_registry.BACKENDS.unregister("ruled_tables")


def _pdf(path: Path) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "Annual report 2024. Revenue grew in every region of the company this year.", fontsize=11)
    page.draw_rect(pymupdf.Rect(*TABLE_RECT), color=(0, 0, 0), width=1)
    for i, (region, value) in enumerate([("North", "412"), ("South", "389"), ("West", "275")]):
        page.insert_text((84, 330 + 28 * i), f"{region} revenue {value} million dollars", fontsize=11)
    doc.save(path)
    return path


def test_a_registered_backend_runs_by_name_and_its_source_ranks_where_it_declares(ruled_tables, tmp_path):
    assert "ruled_tables" in known_backends() and {"pymupdf", "mineru", "off"} <= set(known_backends())
    ws = Workspace(str(tmp_path / "ws"))
    summary = ingest_paths([str(_pdf(tmp_path / "report.pdf"))], ws, IngestOptions(layout="ruled_tables", workers=1),
                           progress=False)
    assert summary.ok and summary.n_pages == 1, summary.errors
    blocks = load_layout(ws)
    ruled = [b for b in blocks if b.source == "ruled"]
    assert len(ruled) == 1 and ruled[0].cls == "table" and "South revenue 389" in ruled[0].text
    # the block is in image pixels: the rectangle scaled from points by the rendering's dpi
    page = load_pages(ws)[0]
    scale = page.width / 612
    assert ruled[0].bbox.raw == pytest.approx(tuple(v * scale for v in TABLE_RECT), abs=2.0)
    # question generation: the text layer's blocks inside the table are duplicates of the better-ranked table block
    regions = page_regions(blocks, page, min_chars=10)
    assert regions[0].block.source == "ruled" and regions[0].source == "table"
    inside = [r for r in regions if r.block.source == "text_layer" and "South" in r.block.text]
    assert inside == []


def test_a_block_source_no_backend_declares_is_one_line_not_ranked_last(tmp_path):
    page_kw = dict(page_id="d_1", doc_id="d", stem="d", page=1, image="pages/d_1.jpg", width=1000, height=1000, dpi=72)
    from vrag_data.schema.records import Page

    page = Page(**page_kw)
    block = LayoutBlock(block_id="b1", doc_id="d", page_id="d_1", page=1, cls="table", text="Revenue 412 389 275",
                        bbox=Box.from_raw((10, 10, 500, 500), 1000, 1000), source="gone_backend")
    with pytest.raises(ValueError) as err:
        page_regions([block], page, min_chars=5)
    msg = str(err.value)
    assert "'gone_backend'" in msg and "d_1" in msg and "register the backend" in msg and "\n" not in msg


def test_register_refuses_a_taken_name_or_source_and_an_unknown_name_is_one_line(ruled_tables, tmp_path):
    class Impostor(LayoutBackend):
        name = "pymupdf"

    with pytest.raises(ValueError, match="the name 'pymupdf' is taken by PymupdfLayout"):
        register_backend(Impostor)

    class Thief(LayoutBackend):
        name = "thief"
        block_sources = {"find_tables": 0}

    with pytest.raises(ValueError, match="block source 'find_tables' is already written by pymupdf"):
        register_backend(Thief)
    with pytest.raises(VragError, match=r"^ingest.layout: unknown layout backend 'pymupf'; known: \[.*'pymupdf'"):
        check_components(IngestOptions(layout="pymupf"))  # where every ingest starts
    assert type(get_backend("pymupdf")).__name__ == "PymupdfLayout"
    res = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "ingest", str(tmp_path), "-w", str(tmp_path / "ws"),
                          "--layout", "pymupf"], capture_output=True, text=True)
    # one line naming the registered backends (read from the registry: an installed plugin adds to it) and how to add one
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: --layout: unknown layout backend 'pymupf'; known: {sorted(set(known_backends()) - {RuledTables.name})} "), lines
    assert "a module in vrag_data/ingest/" in lines[0] and "'vrag_data.layout_backends'" in lines[0], lines
