"""Its layout backend: the figure inside each ruled rectangle of a page is one block (what the oracle crops)."""

from typing import Any

from vrag_data.ingest.backends import LayoutBackend, PageLayout, RawBlock, register_backend


class BoxedFacts(LayoutBackend):
    name = "boxed_facts"
    block_sources = {"boxed": 0}
    per_page = True

    def page_layout(self, page: Any, words: list) -> PageLayout:
        blocks = []
        for rect in (d["rect"] for d in page.get_drawings() if d.get("rect") is not None):
            figures = [w for w in page.get_text("words", clip=rect) if w[4].isdigit() and len(w[4]) == 3]
            if figures:
                x0, y0, x1, y1, text = figures[0][:5]
                blocks.append(RawBlock(rect=(x0, y0, x1, y1), cls="text", source="boxed", text=text))
        return PageLayout(blocks=blocks)


register_backend(BoxedFacts)
