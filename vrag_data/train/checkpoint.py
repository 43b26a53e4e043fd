"""Checkpoints that are either whole or absent.

A checkpoint is written into `checkpoint-<step>.tmp-<pid>`, its files are flushed to disk, a marker file is written
last, and only then is the folder renamed to `checkpoint-<step>`. A run killed while it writes (SIGKILL, power loss,
out of memory) leaves a temp folder, never a `checkpoint-<step>` that a resume would take for the latest. Resume
picks the newest folder that holds the marker, removes temp folders whose writer is gone, and says so in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from vrag_data.process import pid_alive

COMPLETE = "checkpoint_complete.json"  # written last, after every other file is on disk
_NAME = re.compile(r"checkpoint-(\d+)")
_TEMP = re.compile(r"checkpoint-(\d+)\.tmp-(\d+)")


def _note(msg: str) -> None:
    from vrag_data.train.speed import note

    note(msg)


def step_of(path: Path) -> int | None:
    m = _NAME.fullmatch(path.name)
    return int(m.group(1)) if m else None


def is_complete(path: Path) -> bool:
    return path.is_dir() and (path / COMPLETE).is_file()


def staging_dir(out: Path, step: int, writer_pid: int | None = None) -> Path:
    """Where step `step` is written before it is sealed (`writer_pid`: the pid that seals it, rank 0's)."""
    return out / f"checkpoint-{step}.tmp-{writer_pid or os.getpid()}"


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError:  # a file system without fsync on folders: the rename is still atomic
        pass
    finally:
        os.close(fd)


def seal(src: Path, dest: Path, step: int) -> Path:
    """Flush every file in the folder `src`, write the marker last, then rename `src` to `dest` (on one file system:
    atomic). A `dest` already there without the marker (an older version's interrupted save) is replaced."""
    for root, dirs, files in os.walk(src):
        for f in files:
            _fsync(Path(root) / f)
        for d in dirs:
            _fsync(Path(root) / d, directory=True)
    with open(src / COMPLETE, "w") as fh:
        fh.write(json.dumps({"step": step}))
        fh.flush()
        os.fsync(fh.fileno())
    _fsync(src, directory=True)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(src, dest)
    _fsync(dest.parent, directory=True)
    return dest


def complete_checkpoints(out: Path) -> list[Path]:
    """The sealed checkpoints in `out`, oldest step first."""
    found = [(s, p) for p in out.glob("checkpoint-*") if (s := step_of(p)) is not None and is_complete(p)]
    return [p for _, p in sorted(found)]


def rotate(out: Path, keep: int | None) -> None:
    """Keep the newest `keep` sealed checkpoints (None or <= 0: keep all)."""
    if not keep or keep <= 0:
        return
    for p in complete_checkpoints(out)[:-keep]:
        shutil.rmtree(p, ignore_errors=True)


def last_checkpoint(out: Path, notice: Callable[[str], None] | None = None, primary: bool = True) -> Path | None:
    """The newest sealed checkpoint in `out`, or None.

    Temp folders left by a writer that is gone are removed; a `checkpoint-<step>` without the marker (an older
    version's interrupted save) is passed over. Each gets one line through `notice`. `primary`: False on the other
    ranks of a distributed run (rank 0 alone cleans up and speaks)."""
    say = notice or _note
    if not out.is_dir():
        return None
    if not primary:
        done = complete_checkpoints(out)
        return done[-1] if done else None
    for p in sorted(out.glob("checkpoint-*.tmp-*")):
        m = _TEMP.fullmatch(p.name)
        if not m or not p.is_dir():
            continue
        if pid_alive(int(m.group(2))) and int(m.group(2)) != os.getpid():
            say(f"train: {p.name} is being written by process {m.group(2)}, which still runs; left alone")
            continue
        shutil.rmtree(p, ignore_errors=True)
        say(f"train: removed {p.name}, an unfinished checkpoint (its run stopped while writing it)")
    for p in sorted(out.glob("checkpoint-*"), key=lambda q: step_of(q) or -1):
        if step_of(p) is not None and p.is_dir() and not is_complete(p):
            say(f"train: {p.name} is incomplete (no {COMPLETE}: its run stopped while writing it); not resumed from")
    done = complete_checkpoints(out)
    return done[-1] if done else None


MARGIN = 1.05  # a save's estimate plus this share, plus SLACK bytes (metadata, tokenizer, the marker)
SLACK = 64 << 20


def check_space(folder: Path, need: int, what: str) -> None:
    """Stop with one line before a save of about `need` bytes into `folder` would fill its disk."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    want = int(need * MARGIN) + SLACK
    if want > free:
        from vrag_data.errors import VragError

        raise VragError(f"train: {what} needs about {want / 2**30:.1f} GiB in {folder}, which has {free / 2**30:.1f} GiB "
                        "free; free some space, lower sft.save_total_limit / rl.save_total_limit, or set output_dir on "
                        "a larger disk (the checkpoints written so far are kept)")
