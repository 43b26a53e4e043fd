"""Page images for the model: load (LRU-cached), crop to an `ImageRef`, resize under a budget, encode.

Trajectories hold `ImageRef`s (page id + boxes), never bytes; exports and the teacher client call
`render_image_ref` to materialise exactly what the model saw.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

from PIL import Image

from vrag_data.env.geometry import fit_pixels, stack_layout
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import ImageRef
from vrag_data.store.workspace import Workspace

# A rendered page at 144 dpi is ~2-4 MP; refuse absurd files (decompression bombs) before decoding.
MAX_DECODE_PIXELS = 64_000_000
PAGE_CACHE_SIZE = 64


class PageCache:
    """A small thread-safe LRU of decoded pages, keyed by (workspace root, page id)."""

    def __init__(self, size: int = PAGE_CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], Image.Image] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, ws: Workspace, page_id: str) -> Image.Image:
        key = (ws.root, page_id)
        with self._lock:
            img = self._items.get(key)
            if img is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return img
        img = _decode(ws, page_id)
        with self._lock:
            self.misses += 1
            self._items[key] = img
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return img

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = PageCache()


def _decode(ws: Workspace, page_id: str) -> Image.Image:
    if not page_id or "/" in page_id or "\\" in page_id or page_id.startswith("."):
        raise ValueError(f"invalid page id {page_id!r}")
    path = ws.page_image(page_id)
    try:
        with ws.fs.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: page image not found; run `vrag-data ingest` for this workspace") from None
    img = Image.open(io.BytesIO(data))
    w, h = img.size
    if w * h > MAX_DECODE_PIXELS:
        raise ValueError(f"{path}: {w}x{h} pixels exceeds the {MAX_DECODE_PIXELS} pixel limit (decompression bomb?)")
    img.load()
    return img.convert("RGB") if img.mode != "RGB" else img


def load_page(ws: Workspace, page_id: str) -> Image.Image:
    """The decoded page image (RGB, shared from the cache: copy before mutating)."""
    return _CACHE.get(ws, page_id)


def _crop(page: Image.Image, box: Box) -> Image.Image:
    x1, y1, x2, y2 = box.raw
    w, h = page.size
    region = (max(0, int(x1)), max(0, int(y1)), min(w, int(round(x2))), min(h, int(round(y2))))
    if region[2] <= region[0] or region[3] <= region[1]:
        raise ValueError(f"empty crop {box.raw} on a {w}x{h} page")
    return page.crop(region)


def stack_images(images: list[Image.Image]) -> Image.Image:
    """Crops stacked vertically, left-aligned on white (UniDoc-RL shows several regions as one image)."""
    (w, h), offsets = stack_layout([im.size for im in images])
    canvas = Image.new("RGB", (w, h), (255, 255, 255))
    for im, off in zip(images, offsets):
        canvas.paste(im, off)
    return canvas


def render_image_ref(
    ws: Workspace,
    ref: ImageRef,
    max_pixels: int | None = None,
    min_pixels: int | None = None,
    rule: str = "smart",
) -> Image.Image:
    """The image `ref` points at: the whole page, the region `ref.box` (stored with its margin already
    applied, so this is exactly what was shown), or the `ref.stacked` regions stacked vertically;
    resized under the pixel budget when one is given ("smart" = multiples of 28 within the budget,
    "sqrt_budget" = VRAG-RL's rule)."""
    page = load_page(ws, ref.page_id)
    if ref.stacked:
        img = stack_images([_crop(page, b) for b in ref.stacked])
    elif ref.box is not None:
        img = _crop(page, ref.box)
    else:
        img = page
    if max_pixels is not None or min_pixels is not None:
        w, h = fit_pixels(img.width, img.height, min_pixels, max_pixels, rule)
        if (w, h) != img.size:
            img = img.resize((w, h), Image.Resampling.BICUBIC)
    return img


def encode_jpeg(img: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    (img if img.mode == "RGB" else img.convert("RGB")).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
