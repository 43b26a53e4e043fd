"""The environment end to end on real pages of the shared corpus: search -> crop -> rendered crop image."""

from __future__ import annotations

import json

import pytest

from tests.env.test_env import TinySearcher
from vrag_data.env import Environment, EnvSettings, parse_action
from vrag_data.env.geometry import ResizeRule, box_to_model
from vrag_data.env.images import render_image_ref
from vrag_data.env.sanitize import has_action_markup
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Page, Task
from vrag_data.store.workspace import Workspace

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def corpus_ws(shared_corpus, tmp_path_factory):
    import pymupdf

    qa = [json.loads(x) for x in (shared_corpus / "qa.jsonl").read_text().splitlines() if x.strip()]
    item = next(q for q in qa if q.get("evidence_pages") and (shared_corpus / "docs" / q["doc_id"]).is_file())
    pdf = shared_corpus / "docs" / item["doc_id"]
    stem = pdf.stem
    ws = Workspace(str(tmp_path_factory.mktemp("corpus-ws"))).makedirs()
    pages: dict[str, Page] = {}
    with pymupdf.open(pdf) as doc:
        wanted = sorted({*item["evidence_pages"], 1})
        for n in [p for p in wanted if p <= doc.page_count][:4]:
            page = doc[n - 1]
            pix = page.get_pixmap(dpi=144)
            pid = f"{stem}_{n}"
            pix.pil_save(ws.page_image(pid), quality=85)
            pages[pid] = Page(page_id=pid, doc_id="x", stem=stem, page=n, image=f"pages/{pid}.jpg", width=pix.width, height=pix.height, dpi=144, text=page.get_text())
    return ws, pages, item, stem


def test_search_crop_render_on_real_pages(corpus_ws):
    ws, pages, item, stem = corpus_ws
    task = Task(task_id="t", question=item["question"], answer=item["answer"], doc_ids=["x"], doc_stems=[stem])
    env = Environment(task, TinySearcher(pages), pages, {}, EnvSettings(scope="document"))
    r = env.step(parse_action(f"<think>search</think><search>{item['question']}</search>", "vrag_rl"))
    assert not r.invalid and r.observation.images, r.observation
    pid = r.observation.images[0].page_id
    page = pages[pid]
    # the model sees the page smart-resized; it asks for the middle third in those pixels
    target = Box.from_norm((200, 300, 800, 600), page.width, page.height)
    box = box_to_model(target, "qwen2.5-vl", (page.width, page.height), ResizeRule())
    r = env.step(parse_action(f"<think>zoom</think><bbox>{json.dumps(box)}</bbox>", "vrag_rl"))
    assert not r.invalid, r.observation.text
    crop = env.state.crops[0].box
    for got, want in zip(crop.norm, target.norm):
        assert abs(got - want) <= 2  # rounding through the display grid
    ref = r.observation.images[0]
    img = render_image_ref(ws, ref)
    x1, y1, x2, y2 = ref.box.raw
    assert img.size == (x2 - x1, y2 - y1)
    small = render_image_ref(ws, ref, max_pixels=200_704)
    assert small.width * small.height <= 200_704


def test_text_hits_on_real_text_are_markup_free(corpus_ws):
    ws, pages, item, stem = corpus_ws
    task = Task(task_id="t", question=item["question"], answer=item["answer"], doc_ids=["x"], doc_stems=[stem])
    env = Environment(task, TinySearcher(pages), pages, {}, EnvSettings(search_mode="text_hits", scope="document"))
    words = [w for w in item["question"].split() if len(w) > 4][:3] or ["the"]
    r = env.step(parse_action(f"<search>{json.dumps(words)}</search>", "mmdoc_r1"))
    assert not r.invalid
    assert not has_action_markup(r.observation.text)
