"""Set-level filters: VRAG-RL step/action balancing and near-duplicate questions (keep first)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from vrag_data.filters.base import FilterContext, KeepPassed, verdict
from vrag_data.filters.registry import register_filter
from vrag_data.rewards.answer import normalize_answer
from vrag_data.schema.records import Trajectory, Verdict

_ACTIONS = ("search", "select", "crop", "read")


def step_count(t: Trajectory) -> int:
    """Steps = valid tool/answer actions of the episode (invalid turns and bare thoughts do not count)."""
    return sum(1 for turn in t.turns if turn.action.kind not in ("invalid", "think"))


def action_signature(t: Trajectory) -> str:
    """Which action types the episode used, e.g. "search+crop" (VRAG-RL balances search vs perception)."""
    used = {turn.action.kind for turn in t.turns}
    return "+".join(a for a in _ACTIONS if a in used) or "none"


@dataclass
class Balance(KeepPassed):
    """VRAG-RL balancing: keep episodes with `min_steps`..`max_steps` steps, then cap every
    (steps, action types) bucket so no kind of episode dominates. The cap is `max_per_bucket` when set,
    else `ratio` times the median bucket size (rounded up): a rare bucket keeps all it has and cannot shrink
    the others (a cap from the smallest bucket let one single-episode bucket cut 113 episodes to 10).
    Within a bucket the first items (input order) stay."""

    min_steps: int = 2
    max_steps: int = 6
    max_per_bucket: int | None = None
    ratio: float = 2.0
    name: str = "balance"

    def score_all(self, items: Sequence[Trajectory], ctx: FilterContext) -> list[Verdict]:
        if not items:
            return []
        df = pl.DataFrame(
            {
                "i": list(range(len(items))),
                "steps": [step_count(t) for t in items],
                "actions": [action_signature(t) for t in items],
            }
        )
        df = df.with_columns(in_range=pl.col("steps").is_between(self.min_steps, self.max_steps))
        ranked = (
            df.filter(pl.col("in_range"))
            .with_columns(rank=pl.int_range(pl.len()).over(["steps", "actions"]),
                          size=pl.len().over(["steps", "actions"]))
        )
        if ranked.height:
            sizes = ranked.group_by(["steps", "actions"]).len()["len"]
            cap = self.max_per_bucket or max(1, math.ceil(self.ratio * float(sizes.median())))
        else:
            cap = 0
        rank = dict(zip(ranked["i"].to_list(), ranked["rank"].to_list()))
        out = []
        for row in df.iter_rows(named=True):
            t = items[row["i"]]
            bucket = f"({row['steps']} steps, {row['actions']})"
            if not row["in_range"]:
                why = f"{row['steps']} steps outside {self.min_steps}-{self.max_steps}"
                out.append(verdict(t, self.name, False, why, float(row["steps"])))
            elif rank[row["i"]] >= cap:
                out.append(verdict(t, self.name, False, f"bucket {bucket} over cap {cap}", float(row["steps"])))
            else:
                out.append(verdict(t, self.name, True, f"bucket {bucket} within cap {cap}", float(row["steps"])))
        return out


def question_tokens(q: str) -> frozenset[str]:
    return frozenset(normalize_answer(q).split())


_SENTENCE_END = (".", "?", "!", ":", ";")
# words a question or sentence opens with, capitalised for that reason alone (a name there still counts)
_OPENERS = frozenset(
    "what which who whom whose when where why how is are was were do does did can could would should will has have had "
    "according in on for of the a an by from to as at if based given list name give find among between after before "
    "during under with this that these those it there please compared compare calculate compute summarize describe "
    "identify state provide consider".split())


def key_terms(q: str) -> frozenset[str]:
    """What a question is about beyond its wording: its numbers (years, quarters, amounts: every normalised token
    with a digit) and its names (capitalised words, but for the usual words a sentence opens with; possessive
    dropped), normalised."""
    terms = {t for t in question_tokens(q) if any(c.isdigit() for c in t)}
    words = q.split()
    for i, w in enumerate(words):
        core = re.sub(r"['’]s$", "", w.strip("\"'“”‘’()[]{},.?!:;"))
        opens = i == 0 or words[i - 1].endswith(_SENTENCE_END)
        if core[:1].isupper() and not (opens and core.lower() in _OPENERS):
            terms.update(normalize_answer(core).split())
    return frozenset(terms)


def distinct_tasks(a_terms: frozenset[str], a_tokens: frozenset[str], b_terms: frozenset[str],
                   b_tokens: frozenset[str]) -> bool:
    """Two questions ask for different facts when one names a number or a name the other does not mention at all
    ("revenue in 2018" vs "revenue in 2021"; "Acme's revenue" vs "Zephyra's revenue"), however alike the rest."""
    return bool(a_terms - b_tokens) or bool(b_terms - a_tokens)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


_MERSENNE = (1 << 61) - 1
_PERM_RNG = np.random.default_rng(20240611)  # fixed: signatures must agree across runs and processes
_PERM_A = _PERM_RNG.integers(1, 1 << 32, 256, dtype=np.uint64)
_PERM_B = _PERM_RNG.integers(0, 1 << 32, 256, dtype=np.uint64)


def _token_hash(t: str) -> int:
    # blake2b rather than hash(): stable across processes (hash() is salted per interpreter)
    return int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "little")


def _minhash(tokens: frozenset[str], n: int) -> list[int]:
    """n MinHash values from universal hashes (a*x + b) mod p over 32-bit token hashes (no overflow in
    uint64: a, b, x < 2^32)."""
    if not tokens:
        return [0] * n
    x = np.fromiter((_token_hash(t) for t in tokens), dtype=np.uint64, count=len(tokens))
    vals = (np.outer(x, _PERM_A[:n]) + _PERM_B[:n]) % np.uint64(_MERSENNE)
    return vals.min(axis=0).tolist()


@dataclass
class Dedup(KeepPassed):
    """Near-duplicate questions: normalised-token Jaccard >= `threshold` with an earlier kept question that asks
    about the same numbers and names (`distinct_tasks`: a question differing in a year or a company is another task).

    Items of the same task (several samples) are never duplicates of each other unless `one_per_task`.
    Above `minhash_above` items (the exact pairwise scan is quadratic), candidates come from MinHash LSH bands (`bands` x `rows`) and are then
    checked with the exact Jaccard, so large sets stay near-linear.
    """

    threshold: float = 0.8
    one_per_task: bool = False
    minhash_above: int = 500
    bands: int = 16
    rows: int = 4
    name: str = "dedup"

    def __post_init__(self) -> None:
        if self.bands * self.rows > len(_PERM_A):
            raise ValueError(f"dedup: bands * rows must be <= {len(_PERM_A)}")

    def score_all(self, items: Sequence[Trajectory], ctx: FilterContext) -> list[Verdict]:
        toks, terms = [], []
        for t in items:
            task = ctx.tasks.get(t.task_id)
            q = re.sub(r"\s+", " ", task.question if task else (t.prompt[-1].text if t.prompt else ""))
            toks.append(question_tokens(q))
            terms.append(key_terms(q))
        use_lsh = len(items) > self.minhash_above
        buckets: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        kept: list[int] = []
        kept_tasks: set[str] = set()
        out = []
        for i, t in enumerate(items):
            if self.one_per_task and t.task_id in kept_tasks:
                out.append(verdict(t, self.name, False, f"another sample of task {t.task_id} already kept", 1.0))
                continue
            if use_lsh:
                sig = _minhash(toks[i], self.bands * self.rows)
                keys = [(b, tuple(sig[b * self.rows:(b + 1) * self.rows])) for b in range(self.bands)]
                cands = {j for k in keys for j in buckets.get(k, [])}
            else:
                cands = kept
            dup = next(
                (j for j in sorted(cands) if items[j].task_id != t.task_id and jaccard(toks[i], toks[j]) >= self.threshold
                 and not distinct_tasks(terms[i], toks[i], terms[j], toks[j])),
                None,
            )
            if dup is not None:
                sim = jaccard(toks[i], toks[dup])
                out.append(verdict(t, self.name, False,
                                   f"near-duplicate of task {items[dup].task_id} (jaccard {sim:.2f})", sim))
                continue
            kept.append(i)
            kept_tasks.add(t.task_id)
            if use_lsh:
                for k in keys:
                    buckets.setdefault(k, []).append(i)
            out.append(verdict(t, self.name, True, "no earlier near-duplicate", 0.0))
        return out


register_filter(Balance)
register_filter(Dedup)
