"""Whether a process is still running (for files and locks named after their writer's pid)."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet collected by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """Make this (worker) process end when `parent_pid` dies, even by `kill -9` (its pool cannot clean up then).

    Linux: the kernel sends SIGKILL on the parent's death (`prctl(PR_SET_PDEATHSIG)`). Elsewhere: a daemon thread
    watches the parent pid. Either way, a parent that died before this call is caught by comparing pids."""
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died between the spawn and the prctl
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass  # no usable libc: fall back to watching

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid or not pid_alive(parent_pid):
                os._exit(1)
            threading.Event().wait(1.0)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def terminate_pool(pool: object) -> None:
    """Stop a `ProcessPoolExecutor`'s workers now (an interrupted stage must not wait for their documents): SIGTERM,
    then SIGKILL for any still alive after a second. Python 3.14 has `terminate_workers()`; older ones keep the
    processes in `_processes`."""
    import time

    stop = getattr(pool, "terminate_workers", None)
    procs = list((getattr(pool, "_processes", None) or {}).values())
    if stop is not None:
        stop()
    else:
        for p in procs:
            if p.is_alive():
                p.terminate()
    deadline = time.monotonic() + 1.0
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)
