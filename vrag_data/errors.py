"""Errors meant for users: one line that names the file/record and the fix."""


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


def disk_full_message(err: BaseException, where: str = "") -> str | None:
    """One line for a write that failed because the disk (or a quota) is full, naming the path and the free space;
    None when `err` is something else. `where`: the folder the stage writes into, when the error names no file."""
    import errno
    import shutil
    from pathlib import Path

    full = isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
    if not full and not any(s in str(err) for s in _FULL):
        return None
    path = str(getattr(err, "filename", None) or where or ".")
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = f"{shutil.disk_usage(probe).free / 2**20:,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return (f"no space left on the device holding {path} ({free}); free some space (or point the workspace or --out "
            "at a larger disk) and re-run: finished work is kept and nothing half-written is used")
