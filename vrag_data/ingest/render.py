"""Open inputs and rasterise pages: PyMuPDF draws, Pillow encodes the JPEG.

PyMuPDF's own JPEG writer is several times slower than Pillow's encoder on the same pixmap (DESIGN.md),
so the pixmap's buffer goes straight into Pillow without a copy.
"""

from __future__ import annotations

import io
import os
import re
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


def _import_layout_model(threads: int | None) -> None:
    """Import `pymupdf.layout` (which builds its ONNX sessions on import) with our thread settings.

    Its sessions use onnxruntime defaults: one spinning thread per core. With documents already spread
    over worker processes that oversubscribes the cores and burns CPU in spin-waits, so while the model
    loads, `SessionOptions()` hands out options limited to `threads` without spinning, memory arena kept.
    """
    import onnxruntime as ort

    original = ort.SessionOptions

    class _KeepArena(original):  # type: ignore[misc, valid-type]
        # The model's sessions switch the CPU memory arena off, so every page re-allocates (and the kernel
        # re-zeroes) the image model's ~60 MB feature maps: ~20% of the model's CPU time in page faults.
        # With the arena the peak is kept and reused; its size is fixed by the model, not the page.
        @property
        def enable_cpu_mem_arena(self) -> bool:
            return True

        @enable_cpu_mem_arena.setter
        def enable_cpu_mem_arena(self, _value: bool) -> None:
            pass

    def limited() -> Any:
        so = _KeepArena()
        if threads:
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return so

    ort.SessionOptions = limited  # type: ignore[misc]
    try:
        import pymupdf.layout  # noqa: F401  # activates page.get_layout()
    finally:
        ort.SessionOptions = original  # type: ignore[misc]


def import_pymupdf(layout: bool, layout_threads: int | None = None) -> Any:
    """Import PyMuPDF, loading its layout model only when asked: `import pymupdf` pulls in `pymupdf.layout`
    (an ONNX model, ~1 s) whenever that package is importable, even if no page ever uses it. The first
    import always keeps the model out, so that when it is wanted it loads with our session options (a
    model already loaded by an earlier plain `import pymupdf` keeps onnxruntime's defaults)."""
    if "pymupdf" not in sys.modules:
        sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]  # makes that import fail fast
        try:
            import pymupdf
        finally:
            del sys.modules["pymupdf.layout"]
    import pymupdf

    if layout and not callable(getattr(pymupdf, "_get_layout", None)):
        _import_layout_model(layout_threads)
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
    try:  # a damaged page tree can open and then fail on first use
        locked, n_pages = doc.needs_pass, (0 if doc.needs_pass else doc.page_count)
    except Exception as err:  # noqa: BLE001
        doc.close()
        detail = (str(err).splitlines() or [type(err).__name__])[0]
        raise OpenFailed(f"cannot open PDF (damaged or truncated): {detail}") from None
    if locked:
        doc.close()
        raise OpenFailed("encrypted (a password is needed to open it); decrypt it first, e.g. `qpdf --decrypt`")
    if n_pages == 0:
        doc.close()
        raise OpenFailed("PDF has no pages")
    return doc


_ACTIVE = re.compile(rb"/(?:JavaScript|JS)\b")


def active_content_notices(doc: Any) -> list[str]:
    """One-line notices for content that ingest deliberately ignores: JavaScript (never run; pages are only
    rasterised) and embedded files (never extracted)."""
    notes = []
    scripts = 0
    for xref in range(1, doc.xref_length()):
        try:
            if _ACTIVE.search(doc.xref_object(xref, compressed=True).encode("latin-1", "replace")):
                scripts += 1
        except Exception:  # noqa: BLE001 - an unreadable object is not our concern here
            continue
    if scripts:
        notes.append(f"contains JavaScript ({scripts} object(s)); it was not run: only the rendered pages are ingested")
    try:
        n_files = doc.embfile_count()
    except Exception:  # noqa: BLE001
        n_files = 0
    if n_files:
        notes.append(f"carries {n_files} embedded file(s); ignored (not extracted): only the pages are ingested")
    return notes


@dataclass
class Rendered:
    image: Image.Image  # RGB
    sx: float  # pixels per PDF point, x
    sy: float


def page_pixels(width_pt: float, height_pt: float, dpi: int) -> tuple[int, int]:
    return max(1, round(width_pt * dpi / 72)), max(1, round(height_pt * dpi / 72))


def check_pixels(w: int, h: int, max_pixels: int, what: str, fix: str = "lower --dpi") -> None:
    if w * h > max_pixels:
        raise PageTooLarge(f"{what} is {w}x{h} px ({w * h / 1e6:.0f} MP), above max_page_pixels={max_pixels}; {fix}")


def render_pdf_page(page: Any, dpi: int, max_pixels: int) -> Rendered:
    w, h = page_pixels(page.rect.width, page.rect.height, dpi)
    check_pixels(w, h, max_pixels, f"the page at {dpi} dpi")
    # An image XObject is decoded at its own size whatever the page size: a small page can hide a
    # gigapixel decompression bomb that costs seconds of CPU (and memory) to rasterise.
    for img in page.get_images(full=True):
        check_pixels(int(img[2]), int(img[3]), max_pixels, "an embedded image",
                     "the page is skipped (a decompression bomb or a scan far above any useful resolution)")
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
        check_pixels(img.width, img.height, max_pixels, "image", "downscale it first (or a decompression bomb)")
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
