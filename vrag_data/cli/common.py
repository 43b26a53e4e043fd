"""Shared CLI helpers: one-line errors instead of tracebacks, prompt stops on signals, `--set key=value`."""

from __future__ import annotations

import functools
import glob
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from vrag_data.config import ConfigError
from vrag_data.errors import VragError, disk_full_message
from vrag_data.secrets import redact

console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {escape(redact(message))}", highlight=False, soft_wrap=True)  # messages are text, not markup
    raise typer.Exit(code)


_SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


class _Stopper:
    """SIGINT and SIGTERM: the first raises KeyboardInterrupt in the main thread (stages stop their workers and keep
    finished work); a second one, while that cleanup runs, ends the process at once (its workers die with it)."""

    def __init__(self) -> None:
        self.seen = 0
        self.signum: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.seen += 1
        self.signum = signum
        if self.seen > 1:
            os.write(2, b"interrupted again: stopping now\n")
            os._exit(_SIGNAL_EXIT.get(signum, 130))
        raise KeyboardInterrupt


def _install_stopper() -> tuple[_Stopper | None, dict[int, Any]]:
    if threading.current_thread() is not threading.main_thread():
        return None, {}
    stopper, old = _Stopper(), {}
    for sig in _SIGNAL_EXIT:
        old[sig] = signal.signal(sig, stopper)
    return stopper, old


def _exit_now(code: int) -> None:
    """Leave at once after a signal: the stage has kept its finished work, and the interpreter's own teardown (a
    full garbage collection over everything a stage loaded) would take seconds. Exit handlers still run."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _stage_start(workspace: Any, out: Any = None) -> None:
    """What a stage killed outright left in a local workspace is put right before any command works on it: its
    orphaned temp files go, and an export it was writing over an earlier one (in the workspace, in a folder an export
    registered there, or in this command's --out) gives way to that earlier one (one line says so)."""
    if not workspace or "://" in str(workspace) or not os.path.isdir(os.path.expanduser(str(workspace))):
        return
    from vrag_data.store.tempfiles import sweep_temp_files
    from vrag_data.store.workspace import Workspace

    ws = Workspace(os.path.expanduser(str(workspace)))
    sweep_temp_files(ws.root)
    exports = glob.escape(ws.exports)
    extra = [str(out)] if out and os.path.isdir(os.path.join(str(out), ".previous-export")) else []
    if extra or glob.glob(f"{exports}/*/.previous-export") or glob.glob(f"{exports}/*/*/.previous-export") \
            or os.path.isfile(os.path.join(ws.exports, "registry.jsonl")):
        from vrag_data.export.interrupted import restore_interrupted_exports

        for line in restore_interrupted_exports(ws, extra):
            console.print(escape(line), highlight=False, soft_wrap=True)


def friendly_errors(fn: F) -> F:
    """Turn expected failures into `error: ...` on one line and a non-zero exit code; stop promptly on signals."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stopper, old = _install_stopper()
        try:
            _stage_start(kwargs.get("workspace"), kwargs.get("out"))
            return fn(*args, **kwargs)
        except ConfigError as err:
            fail(str(err), 2)
        except VragError as err:
            fail(str(err), err.exit_code)
        except Exception as err:  # noqa: BLE001 - a full disk is one line in every stage; anything else is a bug
            # the folders the command writes into: named when the error names no file (a write() on a full disk)
            message = disk_full_message(err, [str(kwargs[k]) for k in ("out", "workspace") if kwargs.get(k)])
            if message is None:
                raise
            fail(message, 2)
        except KeyboardInterrupt:
            console.print("interrupted; finished work is kept, re-run to resume")
            signum = stopper.signum if stopper is not None else None
            if signum is not None:  # a real signal to this process (not a test's in-process interrupt)
                _exit_now(_SIGNAL_EXIT.get(signum, 130))
            sys.exit(130)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    return wrapper  # type: ignore[return-value]


def set_option() -> Any:
    """`--set key.sub=value` (repeatable) for every command that takes a config: applied over the YAML before
    validation, so a misspelled key fails with one line naming it."""
    return typer.Option(None, "--set", metavar="KEY=VALUE",
                        help="Override a config key (repeatable), e.g. --set synth.samples=4 or --set model.path=out/sft/final; "
                             "the value is read as YAML.")
