"""Fake "scanned" pages: render a vector page, tilt it slightly, add sensor noise, and keep only the raster.

The result has no text layer, like a photocopy, so only OCR or a VLM can read it. Gold boxes follow the
same rotation (`rotate_box`), so they stay exact on the tilted image.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pymupdf
from PIL import Image

from vrag_data.sample.canvas import Rect


def scan_raster(page: pymupdf.Page, dpi: int, angle: float, seed: int) -> bytes:
    """JPEG bytes of `page` rendered in grey at `dpi`, rotated by `angle` degrees (counter-clockwise) with noise."""
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
    img = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    img = img.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255)
    rng = np.random.default_rng(seed)
    arr = np.asarray(img, dtype=np.float32)
    arr = arr * 0.92 + 8 + rng.normal(0.0, 6.0, arr.shape)  # slightly grey paper + sensor noise
    out = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))  # 2-D uint8 -> mode "L"
    buf = io.BytesIO()
    out.save(buf, format="JPEG", quality=70)
    return buf.getvalue()


def rotate_box(box: Rect, angle: float, width: float, height: float) -> Rect:
    """Axis-aligned box enclosing `box` after PIL's `rotate(angle)` about the image centre, clamped to the image.

    PIL turns the picture counter-clockwise as displayed; with y pointing down that maps (dx, dy) to
    (dx cos a + dy sin a, -dx sin a + dy cos a) around the centre."""
    a = math.radians(angle)
    cx, cy = width / 2, height / 2
    xs, ys = [], []
    for x, y in ((box[0], box[1]), (box[2], box[1]), (box[0], box[3]), (box[2], box[3])):
        dx, dy = x - cx, y - cy
        xs.append(cx + dx * math.cos(a) + dy * math.sin(a))
        ys.append(cy - dx * math.sin(a) + dy * math.cos(a))
    return (max(0.0, min(xs)), max(0.0, min(ys)), min(float(width), max(xs)), min(float(height), max(ys)))
