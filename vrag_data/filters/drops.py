"""Why a filter chain kept fewer trajectories than it was given: the filters that dropped the most, each with its
most common reasons (counted) and the config keys that change it. One text for the filter stage's output, the
export's "nothing to export" line, a deployment run's failure and the export's summary."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from vrag_data.schema.records import Verdict

MAX_DROP_LINES = 3
MAX_REASONS = 3
MAX_SETTINGS = 4
NOT_DROPS = ("augmentation",)  # a source replaced by its augmented copy is not dropped

# details that differ per trajectory (a page list, a quoted answer, a bucket, a turn number): the text around them is
# the cause, so trajectories dropped for the same cause count together
_DETAILS = [(re.compile(r"\[[^\]]*\]"), "[...]"), (re.compile(r"\([^)]*\)"), "(...)"),
            (re.compile(r"'[^']*'|\"[^\"]*\""), "'...'"), (re.compile(r"\bturn \d+"), "turn N")]


def reason_kind(reason: str) -> str:
    """A verdict's reason without its per-trajectory details: `gold pages never retrieved: ['a_1']` ->
    `gold pages never retrieved: [...]`."""
    text = reason or "no reason"
    for pattern, repl in _DETAILS:
        text = pattern.sub(repl, text)
    return text[:120]


def drop_causes(verdicts: Iterable[Verdict], chains: Mapping[str, Sequence[Any]], recipe_of: Callable[[str], str],
                n_total: int) -> list[str]:
    """One line per filter that dropped trajectories, most first (a chain filter sees only the survivors of the
    previous one, so its failures are its drops): `<filter> dropped N of M (reasons: <reason> xK, ...); change it
    with <config keys>`. `chains`: recipe -> its chain's configured filters (their settings and values now);
    `recipe_of`: a verdict's trajectory id -> its recipe. A filter not among the chain's is named with the chain key
    that leaves it out; with several recipes each line starts with its recipe."""
    failed: dict[tuple[str, str], Counter[str]] = {}
    for v in verdicts:
        if not v.passed and v.filter not in NOT_DROPS:
            failed.setdefault((recipe_of(v.traj_id), v.filter), Counter())[reason_kind(v.reason)] += 1
    several = len({r for r, _ in failed}) > 1
    lines = []
    for (recipe, name), reasons in sorted(failed.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:MAX_DROP_LINES]:
        f = next((x for x in chains.get(recipe, ()) if getattr(x, "name", "") == name), None)
        top = ", ".join(f"{why} x{k}" for why, k in reasons.most_common(MAX_REASONS))
        lines.append(f"{recipe + ': ' if several else ''}{name} dropped {sum(reasons.values())} of {n_total} "
                     f"(reasons: {top}); change it with {_settings(f, recipe, name)}")
    return lines


def _settings(f: object, recipe: str, name: str) -> str:
    """The config keys that change what filter `name` keeps: its options with their values now, and always the chain
    key that leaves it out."""
    remove = f"filters.chains.{recipe} (leave {name} out)"
    if f is None or not dataclasses.is_dataclass(f):
        return remove
    opts = [(x.name, getattr(f, x.name)) for x in dataclasses.fields(f) if x.name != "name"][:MAX_SETTINGS]
    return ", ".join([*(f"filters.options.{recipe}.{name}.{o}={v!r}" for o, v in opts), remove])
