"""Errors meant for users: one line that names the file/record and the fix."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Sequence
from pathlib import Path


class VragError(Exception):
    """An expected failure; the CLI prints `error: <message>` and exits with `exit_code`."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(ValueError):
    """A config problem, already phrased as one line for the user."""


class MissingComponent(VragError):
    """An optional real component (MinerU, PaddleOCR, ColPali weights, ...) is not installed or has no models."""


_FULL = ("No space left on device", "database or disk is full", "Disk quota exceeded")


def disk_full_message(err: BaseException, where: str | Sequence[str] = "") -> str | None:
    """One line for a write that failed because the disk (or a quota) is full, naming the path and its free space;
    None when `err` is something else. `where`: the folder(s) the stage writes into (its workspace, its --out), named
    when the error names no file: the one on the device with the least free space (the one that filled up)."""
    full = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
    if not full and not any(s in str(err) for s in _FULL):
        return None
    named = getattr(err, "filename", None)
    folders = [str(named)] if named else ([where] if isinstance(where, str) else list(where))
    folders = [f for f in folders if f and "://" not in f.removeprefix("file://")] or ["."]
    path, free = min(((f, _free_bytes(f.removeprefix("file://"))) for f in folders),
                     key=lambda pf: float("inf") if pf[1] is None else pf[1])
    told = "free space unknown" if free is None else f"{free / 2**20:,.1f} MiB free"
    return (f"no space left on the device holding {os.path.abspath(path.removeprefix('file://'))} ({told}); free some "
            "space (or point the workspace or --out at a larger disk) and re-run: finished work is kept and nothing "
            "half-written is used")


def _free_bytes(path: str) -> int | None:
    """Free bytes on the device holding `path` (its nearest existing folder when it is not there yet)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None
