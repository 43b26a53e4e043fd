"""Which files an ingest run covers: PDFs and images, given directly or found under folders."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from vrag_data.errors import VragError

PDF_SUFFIXES = {".pdf"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"}


def input_kind(path: str) -> str:
    """`pdf`, `image` or `other` by file suffix (the content is checked when the file is opened)."""
    suffix = Path(path).suffix.lower()
    if suffix in PDF_SUFFIXES:
        return "pdf"
    if suffix in IMAGE_SUFFIXES:
        return "image"
    return "other"


def printable_path(path: str | Path) -> str:
    """`path` as valid UTF-8: undecodable bytes of a file name shown as \\xNN escapes."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def _utf8(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _link_target(f: Path, skipped: list[tuple[str, str]] | None) -> Path | None:
    """Where `f` leads, or None (recorded in `skipped`) when it is a symlink that loops (`x.pdf -> x.pdf`, a cycle
    of links) or leads nowhere: such a path names no file to read, and the other inputs go on."""
    try:
        target = f.resolve(strict=f.is_symlink())
    except (OSError, RuntimeError) as err:  # RuntimeError: Python < 3.13 reports a loop so
        loop = isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP
        why = ("a symlink loop (following the link leads back to it)" if loop
               else f"a symlink to {os.readlink(f)!r}, which does not exist")
        if skipped is not None:
            skipped.append((printable_path(f), f"error: {why}, skipped; point the link at a PDF or image"))
        return None
    return target


def discover_inputs(paths: list[str], follow_symlinks: bool = False, skipped: list[tuple[str, str]] | None = None) -> list[str]:
    """Expand folders (recursively) into their PDFs and images; keep files given by name as they are, so a
    mislabelled file is reported per file instead of silently skipped. Order is stable and duplicates go.

    A symlink inside a folder that points outside it is not followed (nothing outside is opened) unless
    `follow_symlinks`; each one is added to `skipped` as (path, reason with the fix)."""
    if not paths:
        raise VragError("no input paths given; pass PDFs, images or folders")
    out: list[str] = []
    seen: set[str] = set()
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            root = p.resolve()
            found = []
            for f in sorted(p.rglob("*")):
                if f.name.startswith(".") or input_kind(str(f)) == "other":
                    continue
                if not _utf8(f):  # the name becomes page ids, tables and prompts: it must be text
                    if skipped is not None:
                        skipped.append((printable_path(f), "error: the file name is not valid UTF-8; rename the file"))
                    continue
                target = _link_target(f, skipped)  # resolving a link reads no file content
                if target is None:
                    continue
                if not follow_symlinks and f.is_symlink() and not target.is_relative_to(root):
                    if skipped is not None:
                        skipped.append((str(f), "symlink to a file outside the input folder, not followed "
                                                 "(pass --follow-symlinks to ingest it)"))
                    continue
                if f.is_file():
                    found.append(f)
            if not found and not skipped:
                raise VragError(f"{raw}: folder holds no PDFs or images ({', '.join(sorted(PDF_SUFFIXES | IMAGE_SUFFIXES))})")
            files = found
        elif p.is_symlink() and _link_target(p, skipped) is None:  # a link that leads to no file: skipped, one line
            continue
        elif p.is_file():
            if not _utf8(p):
                if skipped is not None:
                    skipped.append((printable_path(p), "error: the file name is not valid UTF-8; rename the file"))
                continue
            files = [p]
        else:
            raise VragError(f"{raw}: no such file or folder")
        for f in files:
            key = str(f.resolve())
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out
