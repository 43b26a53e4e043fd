"""Pure parts of ingest: class mapping, chart detection, TOC/figure lists, MinerU/PaddleOCR conversion."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vrag_data.errors import MissingComponent, VragError
from vrag_data.ingest import IngestOptions, discover_inputs
from vrag_data.ingest.layout import MODEL_CLASS_MAP, RawBlock, find_charts, grid_markdown, map_model_class, text_in_rect
from vrag_data.ingest.mineru import check_mineru, mineru_page_blocks, norm_box
from vrag_data.ingest.options import MinerUSettings, PaddleOcrSettings
from vrag_data.ingest.paddleocr import check_paddleocr, paddle_result_lines
from vrag_data.ingest.toc import figures_from_blocks, toc_from_headings, toc_from_outline
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock


def test_every_layout_model_class_maps_to_a_layout_class():
    # the classes pymupdf 2.0's bundled model emits (its config's class_list)
    model = ["text", "title", "picture", "table", "list-item", "page-header", "page-footer", "section-header",
             "footnote", "caption", "formula"]
    assert {map_model_class(c) for c in model} == {"text", "title", "figure", "table", "list", "header", "footer", "caption", "formula"}
    assert set(MODEL_CLASS_MAP) == set(model)
    assert map_model_class("something-new") == "other"


def test_charts_from_vector_drawings():
    page_area = 612 * 792
    picture = RawBlock(rect=(100, 100, 300, 300), cls="figure", source="pymupdf")
    table = RawBlock(rect=(50, 500, 550, 700), cls="table", source="pymupdf")
    drawings = [(95, 95, 305, 305), (60, 510, 540, 690), (320, 100, 560, 300), (10, 10, 20, 20)]
    new = find_charts([picture, table], drawings, page_area)
    assert picture.cls == "chart"  # a picture drawn with vector paths
    assert [b.rect for b in new] == [(320, 100, 560, 300)]  # a chart the model missed; the ruled table is not one
    assert new[0].cls == "chart"


def test_text_in_rect_keeps_reading_order():
    words = [((10, 10, 20, 20), "Hello"), ((25, 10, 40, 20), "world"), ((10, 100, 20, 110), "outside")]
    assert text_in_rect(words, (0, 0, 50, 50)) == "Hello world"


def test_toc_from_outline_drops_unresolved_and_out_of_range_pages():
    toc = toc_from_outline([[1, "Intro", 1], [2, "Detail", 3], [1, "Broken", -1], [1, "Later", 40], [1, "  ", 2]], 10)
    assert [(t.level, t.title, t.page) for t in toc] == [(1, "Intro", 1), (2, "Detail", 3)]


def test_toc_from_headings_drops_running_titles():
    heads = [(p, 1, "Annual Report") for p in range(1, 9)] + [(2, 2, "Results"), (5, 2, "Outlook"), (6, 2, "42")]
    toc = toc_from_headings(sorted(heads), 8)
    assert [(t.title, t.page) for t in toc] == [("Results", 2), ("Outlook", 5)]


def _blk(i: int, cls: str, norm: tuple[int, int, int, int], text: str = "", page: int = 1) -> LayoutBlock:
    return LayoutBlock(block_id=f"d_{page}#{i}", doc_id="d", page_id=f"d_{page}", page=page, cls=cls,
                       bbox=Box.from_norm(norm, 1000, 1000), text=text, source="pymupdf")


def test_figure_list_pairs_captions_with_nearest_figure_or_table():
    blocks = [
        _blk(0, "caption", (100, 80, 900, 95), "Figure 1: Approval by party"),
        _blk(1, "figure", (100, 100, 900, 400)),
        _blk(2, "table", (100, 500, 900, 700)),
        _blk(3, "caption", (100, 710, 900, 725), "Table 2. Sample sizes"),
        _blk(4, "figure", (10, 900, 60, 950)),  # a logo: no caption -> not listed
        _blk(5, "caption", (100, 100, 900, 120), "Exhibit 4 Revenue", page=2),  # stray caption naming a figure
    ]
    figs = figures_from_blocks(blocks)
    assert [(f.kind, f.caption, f.page) for f in figs] == [
        ("figure", "Figure 1: Approval by party", 1), ("table", "Table 2. Sample sizes", 1), ("figure", "Exhibit 4 Revenue", 2)]


# A page of MinerU 4 middle JSON, shaped as `parse(..., tier="flash").to_dict()` returns it.
MINERU_PAGE = {
    "page_idx": 5,
    "blocks": [
        {"type": "header", "index": 1, "bbox": [0.42, 0.069, 0.58, 0.08], "content": [{"type": "text", "content": "PEW RESEARCH CENTER"}]},
        {"type": "paragraph_title", "index": 2, "bbox": [0.1, 0.1, 0.5, 0.12], "level": 2, "content": [{"type": "text", "content": "Trump's ratings"}]},
        {"type": "text", "index": 3, "bbox": [0.109, 0.152, 0.869, 0.206], "content": [
            {"type": "hyperlink", "url": "http://x", "content": [{"type": "text", "content": "As reported,"}]},
            {"type": "text", "content": " approval is polarized."}]},
        {"type": "image", "index": 8, "bbox": [0.109, 0.528, 0.885, 0.828], "content": [
            {"type": "image_body", "index": 8, "bbox": [0.109, 0.528, 0.885, 0.828], "content": ""},
            {"type": "image_caption", "index": 9, "bbox": [0.109, 0.84, 0.502, 0.849], "content": [{"type": "text", "content": "Figure 2"}]}]},
        {"type": "table", "index": 10, "bbox": [0.1, 0.86, 0.9, 0.95], "content": "<table><tr><td>a</td></tr></table>"},
        {"type": "page_number", "index": 0, "bbox": [0.496, 0.052, 0.504, 0.062], "content": [{"type": "text", "content": "6"}]},
    ],
}


def test_mineru_page_to_layout_blocks():
    page = mineru_page_blocks(MINERU_PAGE, 1224, 1584, 6)
    got = [(b.cls, b.text) for b in page.blocks]
    assert got == [("header", "PEW RESEARCH CENTER"), ("title", "Trump's ratings"), ("text", "As reported, approval is polarized."),
                   ("figure", ""), ("caption", "Figure 2"), ("table", "\u2039table\u203a\u2039tr\u203a\u2039td\u203aa\u2039/td\u203a\u2039/tr\u203a\u2039/table\u203a"),
                   ("footer", "6")]  # a block's text is outside text: its HTML is inert (the table's own structure is tables_md)
    fig = page.blocks[3].bbox
    assert fig.raw == pytest.approx((0.109 * 1224, 0.528 * 1584, 0.885 * 1224, 0.828 * 1584))
    assert fig.norm == (109, 528, 885, 828)
    assert all(b.source == "mineru" and b.page == 6 for b in page.blocks)
    assert page.tables_md == ["<table><tr><td>a</td></tr></table>"]
    assert page.headings == [(6, 2, "Trump's ratings")]


def test_mineru_boxes_accept_0_1000_and_clamp():
    assert norm_box([100, 200, 500, 1000], 2000, 1000).raw == (200.0, 200.0, 1000.0, 1000.0)
    assert norm_box([-0.1, 0.5, 1.2, 0.6], 100, 100).raw == (0.0, 50.0, 100.0, 60.0)


def test_paddleocr_result_to_lines():
    res = {"res": {"rec_texts": ["Hello", " ", "World"], "rec_scores": [0.99, 0.5, 0.8],
                   "rec_boxes": [[10, 20, 110, 40], [0, 0, 1, 1], [10, 50, 90, 70]]}}
    lines = paddle_result_lines(res)
    assert [(ln.text, ln.rect, ln.score) for ln in lines] == [("Hello", (10, 20, 110, 40), 0.99), ("World", (10, 50, 90, 70), 0.8)]
    polys = {"rec_texts": ["A"], "rec_scores": [0.7], "rec_polys": [[[5, 6], [50, 4], [52, 30], [6, 31]]]}
    assert paddle_result_lines(polys)[0].rect == (5.0, 4.0, 52.0, 31.0)


def test_missing_external_tools_fail_in_one_line(monkeypatch, tmp_path):
    for var in ("VRAG_MINERU_PYTHON", "VRAG_MINERU_URL", "VRAG_PADDLEOCR_CMD", "VRAG_PADDLEOCR_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no paddleocr on PATH
    with pytest.raises(MissingComponent) as err:
        check_mineru(MinerUSettings())
    assert "--layout pymupdf" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(MissingComponent, match="--ocr rapidocr"):
        check_paddleocr(PaddleOcrSettings())
    fake = tmp_path / "paddleocr"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    with pytest.raises(MissingComponent, match="models not found"):
        check_paddleocr(PaddleOcrSettings(command=str(fake), model_dir=str(tmp_path / "none")))
    with pytest.raises(MissingComponent, match="does not exist"):
        check_mineru(MinerUSettings(python=str(tmp_path / "nopython")))
    with pytest.raises(MissingComponent, match="not reachable"):
        check_mineru(MinerUSettings(url="http://127.0.0.1:9"))


def test_options_forbid_unknown_keys_and_hash_only_output_settings():
    with pytest.raises(ValidationError):
        IngestOptions(dpi=144, colour="red")
    base = IngestOptions()
    assert base.output_hash() == IngestOptions(workers=7, strict=True).output_hash()
    assert base.output_hash() != IngestOptions(dpi=100).output_hash()


def test_discover_inputs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "a" / "y.PNG").write_bytes(b"")
    (tmp_path / "a" / "notes.txt").write_text("skip me")
    (tmp_path / "empty").mkdir()
    got = discover_inputs([str(tmp_path / "a"), str(tmp_path / "a" / "x.pdf")])
    assert [p.rsplit("/", 1)[1] for p in got] == ["x.pdf", "y.PNG"]
    with pytest.raises(VragError, match="no such file"):
        discover_inputs([str(tmp_path / "missing.pdf")])
    with pytest.raises(VragError, match="no PDFs or images"):
        discover_inputs([str(tmp_path / "empty")])


def test_grid_markdown_spans_repeat_and_empty_columns_drop():
    # a header cell spanning two columns, a row label spanning two rows, a column nobody fills, a pipe
    cells = [
        (0, 1, 1, 3, "HOVER"), (1, 2, 1, 2, "Gold"), (1, 2, 2, 3, "Open"),
        (2, 4, 0, 1, "I"), (2, 3, 1, 2, "53.4"), (2, 3, 2, 3, "50.7"), (3, 4, 1, 2, "a|b"), (3, 4, 4, 5, "x"),
        (4, 5, 0, 1, "   "),  # blank text: the row it alone would fill is dropped
    ]
    assert grid_markdown(cells).splitlines() == [  # column 3 is empty everywhere and dropped
        "|  | HOVER | HOVER |  |",
        "| --- | --- | --- | --- |",
        "|  | Gold | Open |  |",
        "| I | 53.4 | 50.7 |  |",
        "| I | a\\|b |  | x |",
    ]
    assert grid_markdown([]) == "" and grid_markdown([(0, 1, 0, 1, "  ")]) == ""
