"""Materialise the page and crop images a record shows into `<out>/images/`, once per image (the folder is removed
when no format names its files: every format embedded the bytes).

File names are content-addressed: a hash of the source page file's bytes, the reference (page, crop box,
stacked boxes) and the target size, so re-exports reuse finished files and two records that show the same
image share one file.
"""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

from PIL import Image

from vrag_data.env.images import render_image_ref
from vrag_data.env.geometry import model_image_size
from vrag_data.ids import short_hash
from vrag_data.schema.records import ImageRef
from vrag_data.store import Workspace


class ImageProblem(Exception):
    """An image a record shows cannot be produced; the record is skipped with this reason."""


class MissingImage(ImageProblem):
    """A page image referenced by a record is not on disk."""


class BadImage(ImageProblem):
    """The page exists but the reference cannot be rendered (empty crop, undecodable file)."""


class ImageStore:
    """Writes each distinct image once; returns paths relative to the export root (`images/<hash>.jpg`)."""

    def __init__(self, ws: Workspace, out_root: Path, family: str, quality: int = 90) -> None:
        self.ws, self.out_root, self.family, self.quality = ws, out_root, family, quality
        self.dir = out_root / "images"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._page_sha: dict[str, str] = {}
        self._done: dict[str, str] = {}
        self.written = 0
        self.reused = 0
        # some format's rows name files of images/ (paths); when none does (every format embedded the bytes it read
        # back from there), the folder goes once the export is done (`settle`)
        self.named = False

    def page_sha(self, page_id: str) -> str:
        sha = self._page_sha.get(page_id)
        if sha is None:
            path = self.ws.page_image(page_id)
            if not self.ws.fs.exists(path):
                raise MissingImage(f"{path}: page image missing; re-run ingest for this document or drop the record")
            h = hashlib.sha256()
            with self.ws.fs.open(path, "rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
            sha = self._page_sha[page_id] = h.hexdigest()
        return sha

    def _page_at_family_size(self, page_id: str, max_pixels: int) -> Image.Image:
        """A whole page at the family's processor size, so pixel boxes in the text stay exact. JPEG draft
        mode decodes at a reduced DCT scale first (several times faster than decoding at full size)."""
        try:
            with self.ws.fs.open(self.ws.page_image(page_id), "rb") as f:
                img = Image.open(io.BytesIO(f.read()))
            w, h = model_image_size(img.width, img.height, self.family, max_pixels)
            if img.format == "JPEG":
                img.draft("RGB", (w, h))
            img = img.convert("RGB")
        except OSError as err:
            raise BadImage(f"{page_id}: cannot decode the page image: {err}") from None
        return img if img.size == (w, h) else img.resize((w, h), Image.Resampling.BICUBIC)

    def prune(self) -> int:
        """Remove the images of the folder this export did not use (an export it replaced); the number removed."""
        used = {Path(rel).name for rel in self._done.values()}
        gone = 0
        for p in self.dir.iterdir() if self.dir.is_dir() else ():
            if p.name not in used:
                p.unlink(missing_ok=True)
                gone += 1
        return gone

    def settle(self, replaced: bool) -> None:
        """The finished export's images/: removed whole when no format names its files or no record showed an
        image, else, when the export replaced another run's, without the images this one did not use."""
        if not self.named or not self._done:
            shutil.rmtree(self.dir, ignore_errors=True)
        elif replaced:
            self.prune()

    def materialise(self, ref: ImageRef, max_pixels: int, crop_min_pixels: int | None = None) -> str:
        """The image of `ref` for training: a page at the family's processor size; a crop at its own size within
        `max_pixels`, scaled up to `crop_min_pixels` when the recipe shows crops at a standard resolution."""
        crop = ref.box is not None or bool(ref.stacked)
        crop_min_pixels = crop_min_pixels if crop else None  # a whole page ignores it: one file per page and size
        parts: list = [self.page_sha(ref.page_id), ref.model_dump(mode="json"), self.family, max_pixels]
        if crop_min_pixels:
            parts.append(crop_min_pixels)
        key = short_hash(*parts, n=20)
        rel = self._done.get(key)
        if rel is not None:
            return rel
        rel = f"images/{key}.jpg"
        final = self.out_root / rel
        if final.exists():
            self.reused += 1
        else:
            if not crop:
                img = self._page_at_family_size(ref.page_id, max_pixels)
            else:
                try:
                    img = render_image_ref(self.ws, ref)
                except (ValueError, OSError) as err:
                    raise BadImage(f"{ref.page_id}: cannot render {ref.model_dump(mode='json')}: {err}") from None
                if crop_min_pixels:
                    w, h = model_image_size(img.width, img.height, self.family, max_pixels, min_pixels=crop_min_pixels)
                    img = img if img.size == (w, h) else img.resize((w, h), Image.Resampling.BICUBIC)
                elif img.width * img.height > max_pixels:
                    s = (max_pixels / (img.width * img.height)) ** 0.5
                    img = img.resize((max(1, int(img.width * s)), max(1, int(img.height * s))), Image.Resampling.BICUBIC)
            tmp = self.dir / f".{key}.tmp"
            img.convert("RGB").save(tmp, format="JPEG", quality=self.quality)
            tmp.replace(final)
            self.written += 1
        self._done[key] = rel
        return rel
