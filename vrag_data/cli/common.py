"""Shared CLI helpers: one-line errors instead of tracebacks."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from vrag_data.config import ConfigError
from vrag_data.errors import VragError

console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # messages are text, not markup
    raise typer.Exit(code)


def friendly_errors(fn: F) -> F:
    """Turn expected failures into `error: ...` on one line and a non-zero exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as err:
            fail(str(err), 2)
        except VragError as err:
            fail(str(err), err.exit_code)
        except KeyboardInterrupt:
            console.print("interrupted; finished work is kept, re-run to resume")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
