"""A real small disk for the full-disk tests: a tmpfs of a given size (mounting needs root; elsewhere the test that
asks for one is skipped with the reason)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({res.stderr.strip()[:80]}); the full-disk tests need root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
