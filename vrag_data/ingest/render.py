"""Open inputs and rasterise pages: PyMuPDF draws, Pillow encodes the JPEG.

PyMuPDF's own JPEG writer is several times slower than Pillow's encoder on the same pixmap (DESIGN.md),
so the pixmap's buffer goes straight into Pillow without a copy.
"""

from __future__ import annotations

import io
import os
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vrag_data.store.workspace import Workspace

# Our own pixel cap replaces Pillow's warning-based one, so an oversized image becomes a clear page error.
Image.MAX_IMAGE_PIXELS = None


class PageTooLarge(Exception):
    pass


class OpenFailed(Exception):
    """A document that cannot be ingested at all; the message is the one-line reason."""


def import_pymupdf(layout: bool) -> Any:
    """Import PyMuPDF, loading its layout model only when asked: `import pymupdf` pulls in `pymupdf.layout`
    (an ONNX model, ~1 s) whenever that package is importable, even if no page ever uses it."""
    if "pymupdf" not in sys.modules and not layout:
        sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]  # makes that import fail fast
        try:
            import pymupdf
        finally:
            del sys.modules["pymupdf.layout"]
    import pymupdf

    if layout and not callable(getattr(pymupdf, "_get_layout", None)):
        import pymupdf.layout  # noqa: F401  # activates page.get_layout()
    pymupdf.TOOLS.mupdf_display_errors(False)  # damaged files are reported as IngestErrors, not stderr noise
    pymupdf.TOOLS.mupdf_display_warnings(False)
    return pymupdf


def open_pdf(path: str) -> Any:
    pymupdf = sys.modules["pymupdf"]
    with open(path, "rb") as f:
        head = f.read(1024)
    if not head:
        raise OpenFailed("empty file (0 bytes)")
    if b"%PDF-" not in head:
        raise OpenFailed(f"not a PDF (file starts with {head[:8]!r}); convert it or remove it from the inputs")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as err:  # noqa: BLE001 - MuPDF raises several types for damaged files
        detail = (str(err).splitlines() or [type(err).__name__])[0].replace(f"'{path}'", "it")
        raise OpenFailed(f"cannot open PDF (damaged or truncated): {detail}") from None
    if doc.needs_pass:
        doc.close()
        raise OpenFailed("encrypted (a password is needed to open it); decrypt it first, e.g. `qpdf --decrypt`")
    if doc.page_count == 0:
        doc.close()
        raise OpenFailed("PDF has no pages")
    return doc


@dataclass
class Rendered:
    image: Image.Image  # RGB
    sx: float  # pixels per PDF point, x
    sy: float


def page_pixels(width_pt: float, height_pt: float, dpi: int) -> tuple[int, int]:
    return max(1, round(width_pt * dpi / 72)), max(1, round(height_pt * dpi / 72))


def check_pixels(w: int, h: int, max_pixels: int, what: str) -> None:
    if w * h > max_pixels:
        raise PageTooLarge(f"{what} is {w}x{h} px ({w * h / 1e6:.0f} MP), above max_page_pixels={max_pixels}; lower --dpi")


def render_pdf_page(page: Any, dpi: int, max_pixels: int) -> Rendered:
    w, h = page_pixels(page.rect.width, page.rect.height, dpi)
    check_pixels(w, h, max_pixels, f"page at {dpi} dpi")
    pix = page.get_pixmap(dpi=dpi, alpha=False)
    if pix.n != 3:  # gray/CMYK pixmaps (rare with the default RGB colorspace) are converted once here
        pymupdf = sys.modules["pymupdf"]
        pix = pymupdf.Pixmap(pymupdf.csRGB, pix)
    img = Image.frombuffer("RGB", (pix.width, pix.height), pix.samples_mv, "raw", "RGB", pix.stride, 1)
    img._vrag_pix = pix  # type: ignore[attr-defined]  # keep the pixmap alive while the image borrows its buffer
    return Rendered(img, pix.width / page.rect.width, pix.height / page.rect.height)


def open_image(path: str, max_pixels: int) -> tuple[Image.Image, int | None]:
    """Load an image input as RGB (first frame of multi-frame files); returns it and its dpi if recorded."""
    try:
        img = Image.open(path)
    except Exception as err:  # noqa: BLE001 - Pillow raises many types for unreadable files
        raise OpenFailed(f"cannot open image: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    try:
        check_pixels(img.width, img.height, max_pixels, "image")
    except PageTooLarge as err:
        raise OpenFailed(str(err)) from None
    dpi = img.info.get("dpi")
    try:
        img.seek(0)
        rgb = img.convert("RGB")
    except Exception as err:  # noqa: BLE001
        raise OpenFailed(f"cannot decode image: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    return rgb, round(float(dpi[0])) if dpi and dpi[0] else None


def encode_jpeg(img: Image.Image, quality: int) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def write_bytes_atomic(ws: Workspace, path: str, data: bytes) -> None:
    """Write then rename, so a crash never leaves a half-written page image under its final name."""
    if ws.is_local:
        local = path.removeprefix("file://")
        tmp = f"{os.path.dirname(local)}/.tmp-{uuid.uuid4().hex}.jpg"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local)
    else:
        with ws.fs.open(path, "wb") as f:
            f.write(data)
