"""Which files an ingest run covers: PDFs and images, given directly or found under folders."""

from __future__ import annotations

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


def discover_inputs(paths: list[str]) -> list[str]:
    """Expand folders (recursively) into their PDFs and images; keep files given by name as they are, so a
    mislabelled file is reported per file instead of silently skipped. Order is stable and duplicates go."""
    if not paths:
        raise VragError("no input paths given; pass PDFs, images or folders")
    out: list[str] = []
    seen: set[str] = set()
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            found = sorted(
                f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".") and input_kind(str(f)) != "other"
            )
            if not found:
                raise VragError(f"{raw}: folder holds no PDFs or images ({', '.join(sorted(PDF_SUFFIXES | IMAGE_SUFFIXES))})")
            files = found
        elif p.is_file():
            files = [p]
        else:
            raise VragError(f"{raw}: no such file or folder")
        for f in files:
            key = str(f.resolve())
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out
