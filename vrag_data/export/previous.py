"""An earlier export, set aside while a new one is written into the same folder (`Previous`): put back when the new
one cannot finish, dropped when it has. The export's one image folder stays in place meanwhile (its files are reused),
also when it sits inside a format's folder (`hf/data/images`): it is held apart while what surrounds it moves."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ASIDE = ".previous-export"  # inside the export folder while a new export is written over an earlier one
FOLDER_NOTE = ".image-folder"  # inside ASIDE: the image folder the export that set it aside kept in place
HELD = ".images-held"  # the image folder, for a moment, while what surrounds it is set aside or put back
KEPT = (".export.lock", ASIDE, HELD)  # the lock, and the image folder (content-addressed: a file is whole or absent)


@dataclass
class Previous:
    """An earlier export in `out`, set aside (renamed, so it needs no space) while a new one is written: restored
    when the new one cannot finish, dropped when it has. The image folder (`folder`, relative to `out`: `images` or
    `hf/data/images`) stays in place and its files are reused; an image the failed export added is removed again."""

    out: Path
    aside: Path | None
    images: set[str]
    folder: str = "images"

    @classmethod
    def set_aside(cls, out: Path, folder: str = "images") -> "Previous":
        stale = out / ASIDE
        if stale.is_dir():  # a process killed while writing over an earlier export: that export comes back first
            cls(out, stale, set(), folder).restore(remove_new_images=False)
        kept = out / folder
        images = {p.name for p in kept.iterdir()} if kept.is_dir() else set()
        with _held(out, folder):
            names = [p for p in out.iterdir() if p.name not in KEPT and p.name != folder]
            if not names:
                return cls(out, None, images, folder)
            stale.mkdir()
            # whoever restores it (a later start, after a kill) learns where the images are and which were there before
            (stale / FOLDER_NOTE).write_text(json.dumps({"folder": folder, "images": sorted(images)}))
            for p in names:
                p.rename(stale / p.name)
        return cls(out, stale, images, folder)

    def restore(self, remove_new_images: bool = True) -> None:
        """The earlier export back in place; `remove_new_images`: the images the failed export added go (always when
        the set-aside note records which images were there before)."""
        folder, before = _note(self.aside, self.folder)
        images = self.images if before is None else before
        with _held(self.out, folder) as held:
            for p in list(self.out.iterdir()):
                if p.name in KEPT or p.name == folder:
                    continue
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            if (remove_new_images or before is not None) and held is not None:
                for p in held.iterdir():
                    if p.name not in images:
                        p.unlink(missing_ok=True)
            if self.aside is not None and self.aside.is_dir():
                for p in self.aside.iterdir():
                    if p.name != FOLDER_NOTE and not (self.out / p.name).exists():
                        p.rename(self.out / p.name)
                shutil.rmtree(self.aside, ignore_errors=True)

    def empty(self) -> None:
        """Everything but the lock goes: the new export and the earlier one, page images included."""
        for p in list(self.out.iterdir()):
            if p.name != ".export.lock":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()

    def drop(self) -> None:
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)


def _note(aside: Path | None, default: str) -> tuple[str, set[str] | None]:
    """(image folder, names of the images it held before) from a set-aside export's note; (default, None) without one
    (a note of an older version holds the folder alone)."""
    note = aside / FOLDER_NOTE if aside is not None else None
    if note is None or not note.is_file():
        return default, None
    text = note.read_text().strip()
    try:
        d = json.loads(text)
        return str(d["folder"]), set(d["images"])
    except (ValueError, KeyError, TypeError):
        return text or default, None


@contextmanager
def _held(out: Path, folder: str) -> Iterator[Path | None]:
    """The image folder `out/folder` moved to `out/.images-held` for the block (a nested one would otherwise move with
    the folder around it), then put back where `folder` says, its parents made again if the block removed them."""
    kept, held = out / folder, out / HELD
    if kept.is_dir() and not held.exists():
        kept.rename(held)
    try:
        yield held if held.is_dir() else None
    finally:
        if held.is_dir() and not any(held.iterdir()):
            held.rmdir()  # nothing to put back: no empty folder (nor its parents) where the block left none
        elif held.is_dir():
            kept.parent.mkdir(parents=True, exist_ok=True)
            if kept.is_dir():  # a folder the block put back (an earlier export's): the held files join it
                for p in held.iterdir():
                    p.replace(kept / p.name)
                held.rmdir()
            else:
                held.rename(kept)
