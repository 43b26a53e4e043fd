"""Coordinates per target model family (pure functions).

Stored boxes are raw page pixels + 0-1000 (`Box`). At the model boundary:
- qwen2.5-vl speaks absolute pixels of the processor-resized image (`smart_resize`, factor 28). Exported page
  images are materialised at exactly that size, so a trainer's processor leaves them untouched and the
  numbers in the text point at the same pixels the model sees.
- qwen3-vl speaks 0-1000 relative coordinates (resizing does not change them).
"""

from __future__ import annotations

import re
from typing import Literal

from vrag_data.env.geometry import smart_resize

ModelFamily = Literal["qwen2.5-vl", "qwen3-vl"]
FAMILIES: tuple[str, ...] = ("qwen2.5-vl", "qwen3-vl")
# pixels per merged visual token side: Qwen2.5-VL patch 14 x merge 2, Qwen3-VL patch 16 x merge 2
FACTOR = {"qwen2.5-vl": 28, "qwen3-vl": 32}
MIN_PIXELS = 56 * 56
# Per-recipe image budgets the papers train with (DESIGN.md); others use the VRAG-style budget.
RECIPE_MAX_PIXELS = {"vrag_rl": 401408, "visor": 401408, "unidoc_rl": 200704, "evisrag": 3920000, "mmdoc_r1": 401408}
DEFAULT_MAX_PIXELS = 401408


def model_image_size(width: int, height: int, family: str, max_pixels: int) -> tuple[int, int]:
    """(width, height) of a page image as exported for `family`."""
    h, w = smart_resize(height, width, factor=FACTOR[family], min_pixels=MIN_PIXELS, max_pixels=max_pixels)
    return w, h


def raw_to_family(raw: tuple[float, float, float, float], width: int, height: int, family: str, max_pixels: int) -> list[int]:
    """A raw-pixel box on a (width x height) page -> the coordinates `family` writes."""
    x1, y1, x2, y2 = raw
    if family == "qwen3-vl":
        return [round(x1 * 1000 / width), round(y1 * 1000 / height), round(x2 * 1000 / width), round(y2 * 1000 / height)]
    rw, rh = model_image_size(width, height, family, max_pixels)
    sx, sy = rw / width, rh / height
    clamp = lambda v, hi: max(0, min(hi, round(v)))  # noqa: E731
    return [clamp(x1 * sx, rw), clamp(y1 * sy, rh), clamp(x2 * sx, rw), clamp(y2 * sy, rh)]


def family_to_raw(box: list[float], width: int, height: int, space: str, max_pixels: int) -> tuple[float, float, float, float]:
    """Inverse of `raw_to_family` for a box as the model wrote it in `space` ("raw", "norm1000", or a family)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    if space == "raw":
        return x1, y1, x2, y2
    if space in ("qwen3-vl", "norm1000"):
        return x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000
    rw, rh = model_image_size(width, height, "qwen2.5-vl", max_pixels)
    return x1 * width / rw, y1 * height / rh, x2 * width / rw, y2 * height / rh


_NUM = r"-?\d+(?:\.\d+)?"
_BOX_RE = re.compile(rf"\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]")
