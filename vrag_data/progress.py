"""Progress that is visible wherever a stage runs: a live bar on a terminal, and when stderr is not a terminal
(nohup, CI, Slurm, a file, a Prefect task) a plain line with counts, rate and ETA at least every `every`
seconds, written to stderr and to the `vrag_data.progress` logger (which Prefect's task logs capture).

Lines come by time, not by item: a heartbeat thread writes one every `every` seconds even while no item finishes
(the first document of an ingest may take minutes), and a stage that stops on an error or a signal ends with
"· stopped", never "· done".

A resumed stage starts its task at the work already done (`add_task(..., completed=N)`): rate and ETA count only the
items this process finished since, and the line says "N done before" (skipped documents are not a speed).

`LineProgress` speaks the small part of rich's `Progress` API the stages use (`add_task`, `update`, `advance`,
`start`, `stop`, context manager), so a stage picks one with `progress_for(...)` and keeps its code."""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from vrag_data.errors import ConfigError

log = logging.getLogger("vrag_data.progress")
_LINES_ONLY: ContextVar[bool] = ContextVar("vrag_progress_lines_only", default=False)


@contextmanager
def lines_only() -> Iterator[None]:
    """Within this block progress is written as lines even on a terminal (an orchestrator's task: several run at
    once, and their lines go to the task logs)."""
    token = _LINES_ONLY.set(True)
    try:
        yield
    finally:
        _LINES_ONLY.reset(token)


def _eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _unwinding() -> bool:
    """An exception (an error, Ctrl-C, a cancelled task) is propagating through the caller's `finally`/`__exit__`."""
    return sys.exc_info()[0] is not None


class LineProgress:
    def __init__(self, label: str, every: float = 10.0, stream: Any = None) -> None:
        self.label, self.every = label, every
        self.stream = stream if stream is not None else sys.stderr
        self.tasks: dict[int, dict[str, Any]] = {}
        self._last = 0.0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:  # the stage failed: its one-line error says so, not a "done" line
            with self._lock:
                self.tasks = {}
        self.stop()

    def start(self) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **fields: Any) -> int:
        with self._lock:
            tid = len(self.tasks)
            # `completed` at the start: done before this process (a resume's skipped items), not a part of its rate
            self.tasks[tid] = {"description": description, "total": total, "completed": completed, "before": completed,
                               "t0": time.monotonic(), "fields": dict(fields)}
            self._last = time.monotonic()  # the first line after `every` seconds (a quick stage prints only its last)
        self._start_heartbeat()
        return tid

    def _start_heartbeat(self) -> None:
        """A line every `every` seconds while nothing finishes. The thread runs in a copy of the caller's context, so
        an orchestrator's handler of the progress logger still knows which task run the line belongs to."""
        if self._beat is not None or self.every <= 0:
            return
        ctx = contextvars.copy_context()
        self._beat = threading.Thread(target=ctx.run, args=(self._heartbeat,), name=f"progress-{self.label}", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(1.0, self.every)):
            self._emit()

    def update(self, task_id: int, *, completed: float | None = None, advance: float | None = None,
               total: float | None = None, **fields: Any) -> None:
        with self._lock:
            t = self.tasks[task_id]
            if completed is not None:
                t["completed"] = completed
            if advance:
                t["completed"] += advance
            if total is not None:
                t["total"] = total
            t["fields"].update({k: v for k, v in fields.items() if k not in ("description", "refresh", "visible")})
        self._emit()

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self.tasks:
                # called from a `finally` while Ctrl-C or an error unwinds: the stage stopped, it is not done
                self._emit(force=True, final="stopped" if _unwinding() else "done")
                self.tasks = {}

    def line(self, t: dict[str, Any]) -> str:
        done, total, before = t["completed"], t["total"], t.get("before", 0) or 0
        dt = max(1e-9, time.monotonic() - t["t0"])
        rate = max(0.0, done - before) / dt  # this process's work only
        count = f"{done:g}" if float(done).is_integer() else f"{done:.2f}"  # parts of a document move it by fractions
        parts = [f"{self.label}: {count}" + (f"/{total:g} ({done / total:.0%})" if total else "")]
        if before:
            parts.append(f"{before:g} done before")
        parts.append(f"{rate:.2f}/s")
        if total and rate > 0 and done < total:
            parts.append(f"ETA {_eta((total - done) / rate)}")
        parts.append(f"elapsed {_eta(dt)}")
        extra = " ".join(f"{v}" for v in t["fields"].values() if v not in ("", None))
        return " · ".join(parts) + (f" · {extra}" if extra else "")

    def _emit(self, force: bool = False, final: str | None = None) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last < self.every:
                return
            self._last = now
            for t in self.tasks.values():
                self._write(self.line(t) + (f" · {final}" if final else ""))

    def _write(self, text: str) -> None:
        # written to the stream directly, not with print(): an orchestrator that captures prints (Prefect's
        # log_prints) would log every line a second time beside the logger's copy
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe (the reader went away) must not stop the stage
            pass
        log.info(text)


    def note(self, text: str) -> None:
        """One line now (a stage saying that it started and what it will do)."""
        with self._lock:
            self._write(text)


def announce(bar: Any, text: str) -> None:
    """`text` on its own line above a rich bar, or as a line of a `LineProgress`; nothing when the bar is disabled."""
    if isinstance(bar, LineProgress):
        bar.note(text)
    elif not getattr(bar, "disable", True):
        bar.console.print(text, highlight=False, soft_wrap=True)


def is_terminal(stream: Any = None) -> bool:
    s = stream if stream is not None else sys.stderr
    return bool(getattr(s, "isatty", lambda: False)())


def as_lines() -> bool:
    """Progress goes out as lines here (not a terminal, or inside `lines_only()`)."""
    return _LINES_ONLY.get() or not is_terminal()


EVERY_ENV = "VRAG_DATA_PROGRESS_EVERY"


def line_every(default: float = 10.0) -> float:
    """Seconds between progress lines: `VRAG_DATA_PROGRESS_EVERY` when set (a Slurm log may want 60, a test 0.5)."""
    raw = os.environ.get(EVERY_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{EVERY_ENV}={raw!r}: expected a number of seconds above 0 (unset it for {default:g})")
    return value


def progress_for(label: str, enabled: bool, make_bar: Any, every: float = 10.0) -> Any:
    """`make_bar()` (a rich Progress) on a terminal, a `LineProgress` elsewhere, or the disabled bar."""
    if enabled and as_lines():
        return LineProgress(label, line_every(every))
    return make_bar()


@contextmanager
def stage_progress(label: str, total: int | None, enabled: bool = True, every: float = 10.0) -> Iterator[Any]:
    """`step(n=1, total=None, completed=None, info=None)` for a stage's loop: a bar on a terminal, lines elsewhere (counts, rate,
    ETA at least every `every` seconds), nothing when disabled."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = progress_for(label, enabled, lambda: Progress(
        TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"), console=Console(stderr=True), disable=not enabled, transient=False), every)
    with bar:
        tid = bar.add_task(label, total=total, info="")

        def step(n: float = 1, total: int | None = None, completed: float | None = None, info: str | None = None) -> None:
            extra = {} if info is None else {"info": info}
            bar.update(tid, advance=None if completed is not None else n, completed=completed, total=total, **extra)

        yield step
