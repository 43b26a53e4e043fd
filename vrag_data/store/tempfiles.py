"""Temporary files in a workspace: every writer names one `.tmp-<pid>-...` (`temp_name`) next to the file it becomes
and renames it into place when whole, removing it when the write fails. A process killed outright (kill -9, power
loss) cannot remove its own: `sweep_temp_files`, run when any stage starts, removes those whose process (on this
host) is gone, so no temp file outlives the stage after the one that left it (a live process's, e.g. a stage running
beside this one, or one of a writer on another machine sharing the workspace, is left alone)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import uuid
from pathlib import Path

from vrag_data.process import pid_alive

_TEMP = re.compile(r"^\.tmp-(\d+)-(?:(h[0-9a-f]{6})-)?")
# the host a temp file's writer runs on: a process id says nothing about a writer on another machine sharing the
# workspace (a Ray worker on a shared file system), so only this host's temp files are swept
HOST = "h" + hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
# folders of page images hold only content files and their writers' own temp files (the ingest sweeps those itself)
SKIP_DIRS = frozenset({"pages", "images", ".previous-export"})


def temp_name(final: str | Path, unique: bool = False) -> str:
    """The temporary name `final` is written under: same folder, `.tmp-<pid>-<host>-[<hex>-]<name>`."""
    head, _, name = str(final).rpartition("/")
    tag = f"{os.getpid()}-{HOST}" + (f"-{uuid.uuid4().hex[:12]}" if unique else "")
    return f"{head}/.tmp-{tag}-{name}" if head else f".tmp-{tag}-{name}"


def write_text_atomic(path: Path, text: str) -> None:
    """`text` into `path` through a temp file renamed into place (readers see the old or the new file; a failed
    write leaves neither a half file nor its temp file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(temp_name(path))
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def orphan(name: str) -> bool:
    """Whether `name` is a temp file whose writer process (on this host) is gone."""
    m = _TEMP.match(name)
    if m is None or m.group(2) not in (None, HOST):
        return False
    return int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1)))


def sweep_temp_files(root: str | Path) -> int:
    """Remove every orphaned temp file (and temp folder) under the local folder `root`; the number removed."""
    n = 0
    if not os.path.isdir(root):
        return 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in [f for f in files if orphan(f)]:
            try:
                os.remove(os.path.join(folder, name))
                n += 1
            except OSError:  # gone meanwhile, or not ours to remove: a temp name is never read as data either way
                pass
        for name in [d for d in dirs if orphan(d)]:
            _rmtree(os.path.join(folder, name))
            dirs.remove(name)
            n += 1
    return n


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
