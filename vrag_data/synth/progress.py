"""Run statistics and the live progress bar (episodes/s, requests/s, tokens/s, invalid-action and finish rates)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from vrag_data.progress import progress_for
from vrag_data.schema.records import Trajectory


ERROR_KEY_CHARS = 300


def error_key(reason: str | None) -> str:
    """The whole reason is the cause a user acts on (role, model, URL, HTTP status, the server's words); episodes that
    failed the same way share it. Never cut at the first ':' (URLs have one)."""
    text = " ".join((reason or "unknown").split())
    return text if len(text) <= ERROR_KEY_CHARS else text[:ERROR_KEY_CHARS - 1] + "…"


@dataclass
class RunStats:
    planned: int = 0  # tasks x samples
    skipped: int = 0  # already in the shards from an earlier (possibly crashed) run
    finished: int = 0  # rolled out by this invocation
    answered: int = 0
    errors: int = 0
    turns: int = 0
    invalid: int = 0
    requests: int = 0  # teacher calls of the finished episodes (cache hits included)
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    shards: int = 0
    elapsed_s: float = 0.0
    error_reasons: dict[str, int] = field(default_factory=dict)
    redacted_replies: int = 0  # teacher replies that echoed a configured key, stored with the key replaced by a mark

    def add(self, t: Trajectory) -> None:
        self.finished += 1
        self.answered += t.status == "answered"
        if t.status == "error":
            self.errors += 1
            key = error_key(t.reason)
            self.error_reasons[key] = self.error_reasons.get(key, 0) + 1
        self.turns += len(t.turns)
        self.invalid += t.n_invalid
        self.requests += t.usage.requests
        self.cache_hits += t.usage.cache_hits
        self.prompt_tokens += t.usage.prompt_tokens
        self.completion_tokens += t.usage.completion_tokens

    @property
    def invalid_rate(self) -> float:
        return self.invalid / self.turns if self.turns else 0.0

    @property
    def finish_rate(self) -> float:
        return self.answered / self.finished if self.finished else 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.finished / self.elapsed_s if self.elapsed_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(invalid_rate=self.invalid_rate, finish_rate=self.finish_rate, episodes_per_s=self.episodes_per_s)
        return d


def _si(x: float) -> str:
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.1f}"


class ProgressView:
    """A rich progress bar on stderr; `live` is an optional callable returning teacher pool stats so
    requests/s and tokens/s move while episodes are still running. `total` is this invocation's episodes; a resumed
    run's `done_before` are shown as such, never counted in the rates (they cost nothing here)."""

    def __init__(self, total: int, enabled: bool, live: Callable[[], Mapping[str, Any]] | None = None,
                 done_before: int = 0) -> None:
        self.live = live
        self.before = f"{done_before} done before · " if done_before else ""
        self.t0 = time.monotonic()
        self._p: Any = None
        if enabled:
            self._p = progress_for("synth", True, lambda: Progress(
                TextColumn("[bold]synth[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                TextColumn("{task.fields[rates]}"), console=Console(stderr=True), transient=False,
            ))
            self._task = self._p.add_task("synth", total=total, rates="")
            self._p.start()

    def update(self, stats: RunStats) -> None:
        if self._p is None:
            return
        dt = max(1e-9, time.monotonic() - self.t0)
        live = dict(self.live()) if self.live else {}
        reqs = live.get("requests", stats.requests) + live.get("cache_hits", 0) if live else stats.requests
        toks = live.get("prompt_tokens", 0) + live.get("completion_tokens", 0) if live else stats.prompt_tokens + stats.completion_tokens
        rates = (f"{self.before}{stats.finished / dt:.2f} ep/s · {_si(reqs / dt)} req/s · {_si(toks / dt)} tok/s · "
                 f"invalid {stats.invalid_rate:.1%} · finished {stats.finish_rate:.0%} · errors {stats.errors}")
        self._p.update(self._task, completed=stats.finished, rates=rates)

    def close(self, stats: RunStats) -> None:
        if self._p is not None:
            self.update(stats)
            self._p.stop()
