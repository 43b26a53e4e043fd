"""API keys resolved where the work runs, by the name a role gives (`api_key_env`), never from a file the project writes.

Order (the first that has the key wins):
1. the environment of the process where the stage runs: for a deployment run that is the process `vrag-data up`
   started, whose environment was fixed when `up` ran (a variable exported later does not reach it);
2. every extra source handed to `add_key_source` (the flows add Prefect Secret blocks, named after the variable:
   MY_KEY -> block `my-key`; the library itself knows no Prefect).

A key found in a source is put into this process's environment (memory only), so the stages and the workers they
start (threads, a local Ray instance) read the same key, and registered with `secrets.register_secret`, so it is
redacted wherever it could be printed or stored. A key found nowhere stops with ONE line naming every place looked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from vrag_data.errors import VragError
from vrag_data.secrets import register_secret

# set by `vrag-data up` in the environment of the deployments' process: when it started (HH:MM:SS UTC)
UP_STARTED_ENV = "VRAG_UP_STARTED"


class KeyNotFound(VragError):
    """An API key named by a role is in none of the places looked."""


@dataclass(frozen=True)
class KeySource:
    """A place a key may be kept. `lookup(var)` returns the key or None; `missing(var)` says in a few words where it
    looked and how to put the key there (used only when no place has it)."""

    name: str
    lookup: Callable[[str], str | None]
    missing: Callable[[str], str]


_LOCK = threading.Lock()
_SOURCES: dict[str, KeySource] = {}


def add_key_source(source: KeySource) -> None:
    """Look for keys in `source` too, after the environment (a second source of the same name replaces the first)."""
    with _LOCK:
        _SOURCES[source.name] = source


def remove_key_source(name: str) -> None:
    with _LOCK:
        _SOURCES.pop(name, None)


def key_sources() -> list[KeySource]:
    with _LOCK:
        return list(_SOURCES.values())


def environment_place() -> str:
    """Where the environment lookup looked, in the words a user needs (the `up` server's is fixed at `up` time)."""
    started = os.environ.get(UP_STARTED_ENV)
    if started:
        return (f"not in the environment of the `vrag-data up` server (started {started}; a variable exported after "
                "`up` does not reach it: `vrag-data down` then `vrag-data up` in a shell that has it)")
    return "not in the environment of this process (export it in the shell that runs the command)"


def resolve_key(var: str, where: str) -> str:
    """The key held by variable `var` for `where` (e.g. `roles.writer.endpoints[0]`), from the first place that has
    it; raises `KeyNotFound` with one line naming every place looked."""
    key = os.environ.get(var)
    if not key:
        for src in key_sources():
            key = src.lookup(var)
            if key:
                os.environ[var] = key  # this process and what it starts; never a file
                break
    if not key:
        places = [environment_place(), *(src.missing(var) for src in key_sources())]
        raise KeyNotFound(f"{where}: the variable {var} is not set where this runs: " + "; ".join(places))
    register_secret(key)
    return key
