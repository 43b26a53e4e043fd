"""Page images with numbered candidate boxes drawn on them (UniDoc-RL's layout candidates for the teacher).

`LabelledRef` is an `ImageRef` that also carries boxes to draw; it only ever travels in a teacher request
(never in a stored trajectory), and its extra field changes the request key, so the labelled page and the
plain page are cached apart. `labelled_loader` wraps a workspace image loader to draw them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from vrag_data.env.geometry import fit_pixels
from vrag_data.env.images import encode_jpeg, load_page
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import ImageRef
from vrag_data.store.workspace import Workspace

COLOURS = ((220, 20, 60), (30, 144, 255), (34, 139, 34), (255, 140, 0), (148, 0, 211), (0, 139, 139))


class LabelledRef(ImageRef):
    labels: list[Box] = []  # drawn as "1", "2", ... in this order


def draw_labels(page: Image.Image, boxes: list[Box]) -> Image.Image:
    """A copy of `page` with each box outlined and numbered from 1 at its top-left corner."""
    img = page.copy()
    draw = ImageDraw.Draw(img)
    size = max(14, img.height // 45)
    try:
        font: Any = ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has no sized default font
        font = ImageFont.load_default()
    width = max(2, img.height // 400)
    for i, box in enumerate(boxes, 1):
        colour = COLOURS[(i - 1) % len(COLOURS)]
        x1, y1, x2, y2 = box.raw
        draw.rectangle((x1, y1, x2, y2), outline=colour, width=width)
        label = str(i)
        tx, ty = x1 + width, max(0.0, y1 - size - 2) if y1 > size + 2 else y1 + width
        x0, t, r, b = draw.textbbox((tx, ty), label, font=font)
        draw.rectangle((x0 - 2, t - 1, r + 2, b + 1), fill=colour)
        draw.text((tx, ty), label, fill=(255, 255, 255), font=font)
    return img


def labelled_loader(ws: Workspace, inner: Callable[..., bytes], max_pixels: int | None) -> Callable[..., bytes]:
    """An image loader: labelled refs are drawn on the raw page then resized like a page; others go to `inner`."""

    def load(ref: ImageRef, **kw: int | None) -> bytes:
        if isinstance(ref, LabelledRef) and ref.labels:
            img = draw_labels(load_page(ws, ref.page_id), ref.labels)
            budget = kw.get("max_pixels", max_pixels)
            if budget is not None:
                w, h = fit_pixels(img.width, img.height, None, budget)
                if (w, h) != img.size:
                    img = img.resize((w, h), Image.Resampling.BICUBIC)
            return encode_jpeg(img)
        return inner(ref, **kw)

    return load
