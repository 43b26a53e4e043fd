"""Page thumbnails embedded in `report.html` as JPEG data URIs, so a copied or mailed report shows its pictures.

Each page is scaled to at most `LONG_SIDE` pixels on its long side; the viewer stretches it over the page's raw
pixel box, so crop boxes (raw pixels) line up at any thumbnail size. Thumbnails stop at `BUDGET_BYTES` of
base64 text: pages past it, and pages whose image is missing, are listed with the reason and the viewer says so
on the figure (never a silent blank)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable
from dataclasses import dataclass, field

from PIL import Image

from vrag_data.store import Workspace

LONG_SIDE = 480
QUALITY = 70
BUDGET_BYTES = 24 * 1024 * 1024  # ~1,000 thumbnails of a typical page


@dataclass
class Thumbnails:
    uris: dict[str, str] = field(default_factory=dict)  # page_id -> data:image/jpeg;base64,...
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # page_id -> the full image's (width, height)
    missing: dict[str, str] = field(default_factory=dict)  # page_id -> why it is not embedded


def thumbnail_uri(data: bytes, long_side: int = LONG_SIDE, quality: int = QUALITY) -> tuple[str, tuple[int, int]]:
    """(data URI of the scaled JPEG, (width, height) of the original image)."""
    with Image.open(io.BytesIO(data)) as im:
        size = im.size
        im.draft("RGB", (long_side, long_side))  # JPEG: decode at a reduced scale directly
        small = im.convert("RGB")
        small.thumbnail((long_side, long_side), Image.Resampling.BILINEAR)
        buf = io.BytesIO()
        small.save(buf, "JPEG", quality=quality, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii"), size


def page_thumbnails(ws: Workspace, page_ids: Iterable[str], budget: int = BUDGET_BYTES) -> Thumbnails:
    out = Thumbnails()
    used = 0
    for pid in sorted(set(page_ids)):
        if used >= budget:
            out.missing[pid] = f"not embedded: the report's thumbnail budget ({budget // (1024 * 1024)} MB) is used up"
            continue
        path = ws.page_image(pid)
        try:
            with ws.fs.open(path, "rb") as fh:
                uri, size = thumbnail_uri(fh.read())
        except FileNotFoundError:
            out.missing[pid] = "page image missing from the workspace"
            continue
        except OSError as err:  # unreadable or not an image: say so on the figure
            out.missing[pid] = f"page image unreadable ({type(err).__name__})"
            continue
        out.uris[pid], out.sizes[pid] = uri, size
        used += len(uri)
    return out
