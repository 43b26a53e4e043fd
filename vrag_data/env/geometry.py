"""Pure geometry at the model boundary: resizes, coordinate spaces and crops (DESIGN.md "Coordinates").

Every stored box is raw page pixels + 0-1000 (`Box`). A model speaks one of three spaces:
- "qwen2.5-vl": absolute pixels of the image the model was shown (the processor-resized page),
- "qwen3-vl" / "norm1000": 0-1000 relative to the page,
- "raw": pixels of the rendered page image itself.
Conversions happen only here. Nothing in this module raises for model input: `crop_box` returns a
`CropResult` with a reason instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import re
from typing import TYPE_CHECKING, Literal, Sequence

if TYPE_CHECKING:  # a pydantic record: the box math the rewards use imports none of it (see `crop_box`)
    from vrag_data.schema.geometry_types import Box

CoordSpace = Literal["qwen2.5-vl", "qwen3-vl", "norm1000", "raw"]
COORD_SPACES: tuple[str, ...] = ("qwen2.5-vl", "qwen3-vl", "norm1000", "raw")

MAX_RATIO = 200  # qwen_vl_utils refuses images whose long side is more than 200x the short side
QWEN_FACTOR = 28  # 14 px patches merged 2x2
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 14 * 14 * 4 * 1280
# the Qwen2.5-VL image processor's own limits (preprocessor_config.json) when nobody passes a budget
PROCESSOR_MIN_PIXELS = 3136
PROCESSOR_MAX_PIXELS = 12845056
# VRAG-RL and UniDoc-RL shrink/grow every page (and crop) to this pixel budget before the processor.
VRAG_MIN_PIXELS = 256 * 28 * 28
VRAG_MAX_PIXELS = 512 * 28 * 28
CROP_MARGIN = 28  # VISOR: expand every crop by 28 px on each side before cropping
MIN_CROP = 28  # a crop thinner than one merged patch carries nothing readable

Size = tuple[int, int]  # (width, height)
Quad = tuple[float, float, float, float]


# --------------------------------------------------------------------------- resizes


def _round_by(n: float, f: int) -> int:
    return round(n / f) * f


def _ceil_by(n: float, f: int) -> int:
    return math.ceil(n / f) * f


def _floor_by(n: float, f: int) -> int:
    return math.floor(n / f) * f


def smart_resize(
    height: int,
    width: int,
    factor: int = QWEN_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> tuple[int, int]:
    """(height, width) the Qwen2/2.5-VL processor resizes an image to; same arithmetic as
    `qwen_vl_utils.smart_resize`, including its ValueError for aspect ratios over 200."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    if max_pixels < min_pixels:
        raise ValueError("max_pixels must be >= min_pixels")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_RATIO}, got {max(height, width) / min(height, width)}"
        )
    h_bar = max(factor, _round_by(height, factor))
    w_bar = max(factor, _round_by(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = _floor_by(height / beta, factor)
        w_bar = _floor_by(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by(height * beta, factor)
        w_bar = _ceil_by(width * beta, factor)
    return h_bar, w_bar


def sqrt_budget_resize(
    height: int, width: int, min_pixels: int | None = VRAG_MIN_PIXELS, max_pixels: int | None = VRAG_MAX_PIXELS
) -> tuple[int, int]:
    """(height, width) after VRAG-RL's pixel-budget resize: scale both sides by sqrt(budget/area) when the
    area is above `max_pixels` (checked first) or below `min_pixels`, truncating to int like the reference
    `process_image` (so the result may land a few pixels under `min_pixels`)."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    if max_pixels is not None and width * height > max_pixels:
        f = math.sqrt(max_pixels / (width * height))
        width, height = int(width * f), int(height * f)
    if min_pixels is not None and width * height < min_pixels:
        f = math.sqrt(min_pixels / (width * height))
        width, height = int(width * f), int(height * f)
    return max(1, height), max(1, width)


@dataclass(frozen=True)
class ResizeRule:
    """How a page (or crop) is resized before the model sees it.

    kind "smart": `smart_resize` with this budget (what the processor itself does);
    kind "sqrt_budget": VRAG-RL's budget resize, then the processor's `smart_resize` with its wide defaults
    (the model's absolute coordinates refer to that final grid, not to the intermediate image);
    kind "none": the processor's `smart_resize` with its own default limits only.
    """

    kind: Literal["smart", "sqrt_budget", "none"] = "smart"
    min_pixels: int = QWEN_MIN_PIXELS
    max_pixels: int = QWEN_MAX_PIXELS
    factor: int = QWEN_FACTOR

    def display_size(self, width: int, height: int) -> Size:
        """(width, height) of the image as the model sees it."""
        if self.kind == "smart":
            h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        elif self.kind == "sqrt_budget":
            bh, bw = sqrt_budget_resize(height, width, self.min_pixels, self.max_pixels)
            h, w = smart_resize(bh, bw, self.factor, PROCESSOR_MIN_PIXELS, PROCESSOR_MAX_PIXELS)
        else:
            h, w = smart_resize(height, width, self.factor, PROCESSOR_MIN_PIXELS, PROCESSOR_MAX_PIXELS)
        return w, h


def fit_pixels(width: int, height: int, min_pixels: int | None, max_pixels: int | None, rule: str = "smart") -> Size:
    """(width, height) to resize an image (a page or a crop) to under a pixel budget.
    "smart" snaps to multiples of 28 (the processor then leaves it alone); "sqrt_budget" is VRAG-RL's rule."""
    if rule == "sqrt_budget":
        h, w = sqrt_budget_resize(height, width, min_pixels, max_pixels)
        return w, h
    lo = QWEN_MIN_PIXELS if min_pixels is None else min_pixels
    hi = max(lo, QWEN_MAX_PIXELS if max_pixels is None else max_pixels)
    ratio = max(width, height) / max(1, min(width, height))
    if ratio > MAX_RATIO:  # smart_resize refuses these; fall back to the plain budget rule
        h, w = sqrt_budget_resize(height, width, min_pixels, max_pixels)
        return w, h
    h, w = smart_resize(height, width, QWEN_FACTOR, lo, hi)
    return w, h


# --------------------------------------------------------------------------- coordinate spaces


def to_raw(box: Sequence[float], space: str, raw_size: Size, display_size: Size | None = None) -> Quad:
    """A box as the model wrote it -> raw page pixels (no clamping, no rounding)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    rw, rh = raw_size
    if space == "raw":
        return (x1, y1, x2, y2)
    if space in ("qwen3-vl", "norm1000"):
        return (x1 * rw / 1000, y1 * rh / 1000, x2 * rw / 1000, y2 * rh / 1000)
    if space == "qwen2.5-vl":
        if display_size is None:
            raise ValueError("qwen2.5-vl coordinates need the display size of the page")
        dw, dh = display_size
        sx, sy = rw / dw, rh / dh
        return (x1 * sx, y1 * sy, x2 * sx, y2 * sy)
    raise ValueError(f"unknown coordinate space {space!r}; expected one of {COORD_SPACES}")


def from_raw(box: Sequence[float], space: str, raw_size: Size, display_size: Size | None = None) -> Quad:
    """Raw page pixels -> the model's space (rounded to ints for the 0-1000 and pixel spaces, as models write them)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    rw, rh = raw_size
    if space == "raw":
        return (x1, y1, x2, y2)
    if space in ("qwen3-vl", "norm1000"):
        return tuple(float(round(v)) for v in (x1 * 1000 / rw, y1 * 1000 / rh, x2 * 1000 / rw, y2 * 1000 / rh))  # type: ignore[return-value]
    if space == "qwen2.5-vl":
        if display_size is None:
            raise ValueError("qwen2.5-vl coordinates need the display size of the page")
        dw, dh = display_size
        return tuple(float(round(v)) for v in (x1 * dw / rw, y1 * dh / rh, x2 * dw / rw, y2 * dh / rh))  # type: ignore[return-value]
    raise ValueError(f"unknown coordinate space {space!r}; expected one of {COORD_SPACES}")


def box_to_model(box: Box, space: str, raw_size: Size, rule: ResizeRule | None = None) -> list[int]:
    """A stored box as a model of `space` would write it (used by the oracle policy and augmentations)."""
    if space in ("qwen3-vl", "norm1000"):
        return [int(v) for v in box.norm]
    display = (rule or ResizeRule()).display_size(*raw_size) if space == "qwen2.5-vl" else None
    return [int(round(v)) for v in from_raw(box.raw, space, raw_size, display)]


# --------------------------------------------------------------------------- crops


@dataclass(frozen=True)
class CropResult:
    """`region` is what gets cut out and shown (margin added, clamped, integer pixels); `target` is the
    model's box mapped to raw and clamped, without margin (what ROI rewards compare to gold)."""

    ok: bool
    reason: str = ""
    region: Box | None = None
    target: Box | None = None


def crop_box(
    box: Sequence[float],
    space: str,
    raw_size: Size,
    display_size: Size | None = None,
    margin: float = CROP_MARGIN,
    min_size: float = MIN_CROP,
) -> CropResult:
    """Map a model box to raw pixels, expand by `margin` raw pixels, clamp to the page, and reject
    degenerate boxes with a reason. Never raises."""
    try:
        vals = [float(v) for v in box]
    except (TypeError, ValueError):
        return CropResult(False, "box must be four numbers [x1, y1, x2, y2]")
    if len(vals) != 4:
        return CropResult(False, f"box must have 4 numbers [x1, y1, x2, y2], got {len(vals)}")
    if not all(math.isfinite(v) for v in vals):
        return CropResult(False, "box contains NaN or infinite values")
    x1, y1, x2, y2 = vals
    if x2 <= x1 or y2 <= y1:
        return CropResult(False, f"degenerate box {_fmt(vals)}: need x2 > x1 and y2 > y1")
    rw, rh = raw_size
    if rw <= 0 or rh <= 0:
        return CropResult(False, f"page has no size ({rw}x{rh})")
    if space == "qwen2.5-vl" and (display_size is None or display_size[0] <= 0 or display_size[1] <= 0):
        return CropResult(False, "qwen2.5-vl coordinates need the display size of the page")
    if space not in COORD_SPACES:
        return CropResult(False, f"unknown coordinate space {space!r}")
    limit = _space_limit(space, raw_size, display_size)
    if x1 >= limit[0] or y1 >= limit[1] or x2 <= 0 or y2 <= 0:
        return CropResult(False, f"box {_fmt(vals)} lies outside the image ({limit[0]}x{limit[1]} in {space} space)")
    rx1, ry1, rx2, ry2 = to_raw(vals, space, raw_size, display_size)
    tx1, ty1, tx2, ty2 = _clamp((rx1, ry1, rx2, ry2), rw, rh)
    if tx2 - tx1 < min_size or ty2 - ty1 < min_size:
        return CropResult(
            False, f"box {_fmt(vals)} is smaller than {min_size:g} px on the page after clamping ({tx2 - tx1:.0f}x{ty2 - ty1:.0f})"
        )
    ex1, ey1, ex2, ey2 = _clamp((rx1 - margin, ry1 - margin, rx2 + margin, ry2 + margin), rw, rh)
    region = (math.floor(ex1), math.floor(ey1), math.ceil(ex2), math.ceil(ey2))
    from vrag_data.schema.geometry_types import Box

    return CropResult(
        True,
        region=Box.from_raw(region, rw, rh),
        target=Box.from_raw((tx1, ty1, tx2, ty2), rw, rh),
    )


def _space_limit(space: str, raw_size: Size, display_size: Size | None) -> Size:
    if space in ("qwen3-vl", "norm1000"):
        return (1000, 1000)
    if space == "qwen2.5-vl":
        assert display_size is not None
        return display_size
    return raw_size


def _clamp(q: Quad, w: float, h: float) -> Quad:
    x1, y1, x2, y2 = q
    return (min(max(x1, 0.0), w), min(max(y1, 0.0), h), min(max(x2, 0.0), w), min(max(y2, 0.0), h))


def _fmt(vals: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in vals) + "]"


# --------------------------------------------------------------------------- stacking (UniDoc-RL)


def stack_layout(sizes: Sequence[Size]) -> tuple[Size, list[tuple[int, int]]]:
    """Several crops stacked vertically, left-aligned: the canvas (width, height) and each crop's (x, y) offset."""
    offsets: list[tuple[int, int]] = []
    y = 0
    width = 0
    for w, h in sizes:
        offsets.append((0, y))
        y += int(h)
        width = max(width, int(w))
    return (width, y), offsets


# --------------------------------------------------------------------------- overlap


def _ordered(b: Sequence[float]) -> Quad:
    x1, y1, x2, y2 = (float(v) for v in b[:4])
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def box_area(b: Sequence[float]) -> float:
    x1, y1, x2, y2 = _ordered(b)
    return (x2 - x1) * (y2 - y1)


def intersection(a: Sequence[float], b: Sequence[float]) -> float:
    ax1, ay1, ax2, ay2 = _ordered(a)
    bx1, by1, bx2, by2 = _ordered(b)
    return max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes in the same space. Corners are re-ordered first,
    so the result never depends on how a model wrote them; two zero-area boxes score 0."""
    inter = intersection(a, b)
    union = box_area(a) + box_area(b) - inter
    return inter / union if union > 0 else 0.0


# --------------------------------------------------------------------------- export model families
# Stored boxes are raw page pixels + 0-1000 (`Box`). At the model boundary qwen2.5-vl speaks absolute pixels of
# the processor-resized image (smart_resize, factor 28; exported images are materialised at exactly that size,
# so a trainer's processor leaves them untouched), qwen3-vl speaks 0-1000 relative coordinates.

ModelFamily = Literal["qwen2.5-vl", "qwen3-vl"]
FAMILIES: tuple[str, ...] = ("qwen2.5-vl", "qwen3-vl")
# pixels per merged visual token side: Qwen2.5-VL patch 14 x merge 2, Qwen3-VL patch 16 x merge 2
FACTOR = {"qwen2.5-vl": 28, "qwen3-vl": 32}
MIN_PIXELS = 56 * 56
# image budget of an export whose run manifest names none (a VRAG-style budget)
DEFAULT_MAX_PIXELS = 401408


def model_image_size(width: int, height: int, family: str, max_pixels: int, min_pixels: int = MIN_PIXELS) -> tuple[int, int]:
    """(width, height) of a page image as exported for `family`."""
    h, w = smart_resize(height, width, factor=FACTOR[family], min_pixels=min_pixels, max_pixels=max_pixels)
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
