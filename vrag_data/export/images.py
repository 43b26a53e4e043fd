"""Materialise the page and crop images a record shows into the export's one image folder (`<out>/images/`, or
`<out>/hf/data/images/` when the HF image-folder layout is selected), once per image (the folder is removed when no
format names its files: every format embedded the bytes).

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
    """Writes each distinct image once into `folder` (relative to the export root: `images`, or the folder a selected
    format keeps its images in); returns paths relative to the export root (`<folder>/<hash>.jpg`)."""

    def __init__(self, ws: Workspace, out_root: Path, family: str, quality: int = 90, folder: str = "images") -> None:
        self.ws, self.out_root, self.family, self.quality = ws, out_root, family, quality
        self.folder = folder
        self.dir = out_root / folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self._page_sha: dict[str, str] = {}
        self._done: dict[str, str] = {}
        self.used: set[str] = set()  # images of the records written (a record the gate stopped names none of its own)
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

    def mark_used(self, paths: list[str]) -> None:
        """The images a written record names (paths as `materialise` returned them)."""
        self.used.update(paths)

    def prune(self) -> int:
        """Remove the images of the folder no written record names (an export it replaced, a record the gate stopped
        after its images were made); the number removed."""
        used = {Path(rel).name for rel in self.used}
        gone = 0
        for p in self.dir.iterdir() if self.dir.is_dir() else ():
            if p.name not in used:
                p.unlink(missing_ok=True)
                gone += 1
        return gone

    def settle(self, replaced: bool = False) -> None:
        """The finished export's image folder: removed whole when no format names its files or no written record shows
        an image, else without the images no written record names (`replaced`: kept for callers; pruning is always)."""
        if not self.named or not self.used:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            self.prune()

    def materialise(self, ref: ImageRef, max_pixels: int, crop_min_pixels: int | None = None, pending: bool = False) -> str:
        """The image of `ref` for training: a page at the family's processor size; a crop at its own size within
        `max_pixels`, scaled up to `crop_min_pixels` when the recipe shows crops at a standard resolution. `pending`:
        for a record not yet past the export's gate (its images count as used once it is written: `mark_used`)."""
        crop = ref.box is not None or bool(ref.stacked)
        crop_min_pixels = crop_min_pixels if crop else None  # a whole page ignores it: one file per page and size
        parts: list = [self.page_sha(ref.page_id), ref.model_dump(mode="json"), self.family, max_pixels]
        if crop_min_pixels:
            parts.append(crop_min_pixels)
        key = short_hash(*parts, n=20)
        rel = self._done.get(key)
        if rel is not None:
            if not pending:
                self.used.add(rel)
            return rel
        rel = f"{self.folder}/{key}.jpg"
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
        if not pending:
            self.used.add(rel)
        return rel
