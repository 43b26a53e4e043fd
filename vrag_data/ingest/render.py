"""Open inputs and rasterise pages: PyMuPDF draws, libjpeg-turbo (simplejpeg, else Pillow) encodes the JPEG.

PyMuPDF's own JPEG writer is several times slower than libjpeg-turbo on the same pixmap (DESIGN.md), so
the pixmap's buffer is viewed as an array (no copy) and encoded by simplejpeg (Pillow if it is missing).
"""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from vrag_data.process import pid_alive
from vrag_data.store.workspace import Workspace

try:
    import simplejpeg as _simplejpeg
except ImportError:  # optional speed-up; Pillow encodes the same JPEG a little slower
    _simplejpeg = None

# Our own pixel cap replaces Pillow's warning-based one, so an oversized image becomes a clear page error.
Image.MAX_IMAGE_PIXELS = None


class PageTooLarge(Exception):
    pass


class OpenFailed(Exception):
    """A document that cannot be ingested at all; the message is the one-line reason."""


_LAYOUT_LOCK = threading.Lock()
_IMPORT_LOCK = threading.Lock()
_SESSIONS_MODULE = "pymupdf.layout.onnx.common_util"  # where the layout model builds every ONNX session


def _import_layout_model(threads: int | None) -> None:
    """Import `pymupdf.layout` (which builds its ONNX sessions on import) with our session options.

    Its sessions use onnxruntime defaults: one spinning thread per core, and no CPU memory arena. With documents
    already spread over workers that oversubscribes the cores and burns CPU in spin-waits, and without the arena
    every page re-allocates (and the kernel re-zeroes) the image model's ~60 MB feature maps (~20% of its CPU time
    in page faults). The model builds every session through one function, `make_session` of its ONNX helper
    module: that module is loaded first, under its own name, and its `make_session` replaced before the model
    imports it. Nothing of onnxruntime is patched, so OCR sessions built meanwhile in other threads keep theirs.
    One lock: threads of one process import the model once.
    """
    with _LAYOUT_LOCK:
        pymupdf = sys.modules["pymupdf"]
        if callable(getattr(pymupdf, "_get_layout", None)):
            return
        import importlib.util

        import onnxruntime as ort

        if _SESSIONS_MODULE not in sys.modules:
            path = os.path.join(os.path.dirname(pymupdf.__file__), "layout", "onnx", "common_util.py")
            spec = importlib.util.spec_from_file_location(_SESSIONS_MODULE, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"{path}: PyMuPDF's layout model is not where this version expects it")
            helper = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(helper)

            def make_session(model_path: str, providers: Any = None) -> Any:
                so = ort.SessionOptions()
                so.enable_cpu_mem_arena = True
                if threads:
                    so.intra_op_num_threads = threads
                    so.inter_op_num_threads = 1
                    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
                return ort.InferenceSession(model_path, sess_options=so, providers=providers)

            helper.make_session = make_session
            sys.modules[_SESSIONS_MODULE] = helper
        import pymupdf.layout  # noqa: F401  # activates page.get_layout()


def import_pymupdf(layout: bool, layout_threads: int | None = None) -> Any:
    """Import PyMuPDF, loading its layout model only when asked: `import pymupdf` pulls in `pymupdf.layout`
    (an ONNX model, ~1 s) whenever that package is importable, even if no page ever uses it. The first
    import always keeps the model out, so that when it is wanted it loads with our session options (a
    model already loaded by an earlier plain `import pymupdf` keeps onnxruntime's defaults)."""
    with _IMPORT_LOCK:  # threads of one process (Prefect's thread runner) import it once, the same way
        if "pymupdf" not in sys.modules:
            sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]  # makes that import fail fast
            try:
                import pymupdf
            finally:
                del sys.modules["pymupdf.layout"]
    import pymupdf

    if layout:
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


class _PixmapView(np.ndarray):
    """An array over a pixmap's samples that holds the pixmap (arrays derived from it hold this one)."""

    owner: Any = None


@dataclass
class Rendered:
    pixels: np.ndarray  # HxWx3 uint8 RGB, a read-only view of the pixmap's buffer (no copy)
    sx: float  # pixels per PDF point, x
    sy: float
    pix: Any = None  # the pixmap that owns the buffer (kept alive with the view)

    @property
    def size(self) -> tuple[int, int]:
        return self.pixels.shape[1], self.pixels.shape[0]

    @property
    def image(self) -> Image.Image:
        """A Pillow image of the page (a copy: Pillow stores RGB as 4 bytes per pixel)."""
        return Image.fromarray(self.pixels, "RGB")


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
    buf = np.frombuffer(pix.samples_mv, dtype=np.uint8).reshape(pix.height, pix.stride)
    pixels = buf[:, : pix.width * 3].reshape(pix.height, pix.width, 3).view(_PixmapView)
    pixels.owner = pix  # `samples_mv` does not keep the pixmap alive; every view of `pixels` does now
    return Rendered(pixels, pix.width / page.rect.width, pix.height / page.rect.height, pix)


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


def encode_jpeg(img: Image.Image | np.ndarray, quality: int) -> bytes:
    """JPEG bytes (4:2:0, libjpeg-turbo either way). An HxWx3 RGB array is encoded in place by simplejpeg:
    Pillow would first copy it into its own 4-bytes-per-pixel layout (~1.5 ms of a ~15 ms page)."""
    if isinstance(img, np.ndarray):
        if _simplejpeg is not None and img.ndim == 3 and img.shape[2] == 3:
            arr = np.ascontiguousarray(img)  # a no-op for a pixmap view (its stride is width * 3)
            return bytes(_simplejpeg.encode_jpeg(arr, quality=quality, colorspace="RGB", colorsubsampling="420"))
        img = Image.fromarray(img)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def remove_orphan_temp_images(pages_dir: str) -> int:
    """Remove the half-written page images a killed ingest left behind (their writer process is gone)."""
    n = 0
    if not os.path.isdir(pages_dir):
        return 0
    for name in os.listdir(pages_dir):
        if not name.startswith(".tmp-") or not name.endswith(".jpg"):
            continue
        pid = name.split("-")[1]
        alive = pid.isdigit() and pid_alive(int(pid))
        if not alive:
            try:
                os.remove(os.path.join(pages_dir, name))
                n += 1
            except FileNotFoundError:
                pass
    return n


def write_bytes_atomic(ws: Workspace, path: str, data: bytes) -> None:
    """Write then rename, so a crash never leaves a half-written page image under its final name."""
    if ws.is_local:
        local = path.removeprefix("file://")
        tmp = f"{os.path.dirname(local)}/.tmp-{os.getpid()}-{uuid.uuid4().hex}.jpg"  # the pid lets a re-run clean up
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local)
    else:
        with ws.fs.open(path, "wb") as f:
            f.write(data)
