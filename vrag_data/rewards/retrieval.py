"""Retrieval rewards (pure): VRAG-RL NDCG, UniDoc-RL interleaved-rank NDCG and selection reward,
VISOR's verification-aware retrieval reward, MM-Doc-R1's read-page recall."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def dedup(items: Iterable[str]) -> list[str]:
    """First occurrence wins; a page shown twice is one retrieval for ranking purposes."""
    seen: set[str] = set()
    out = []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def ndcg(retrieved: Sequence[str], gold: Iterable[str], no_gold: float = 0.0) -> float:
    """VRAG-RL's retrieval-efficiency reward.

    Binary relevance over the de-duplicated retrieval order: DCG = sum over relevant positions i (1-based)
    of 1/log2(i+1); IDCG puts every gold page first: sum_{i=1..|gold|} 1/log2(i+1). With no gold pages
    (unanswerable task) the ratio is undefined and `no_gold` is returned.
    """
    gold_set = set(gold)
    if not gold_set:
        return no_gold
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(dedup(retrieved), 1) if d in gold_set)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, len(gold_set) + 1))
    return min(1.0, dcg / idcg)


def interleave_by_rank(candidate_lists: Sequence[Sequence[str]]) -> list[str]:
    """UniDoc-RL's unified list: rank 1 of every search (in search order), then rank 2 of every search, ...

    Duplicates keep their first (best) position. Ranking by rank-then-step instead of concatenating
    steps means a gold page found at rank 1 by a late search still counts near the top.
    """
    out: list[str] = []
    depth = max((len(c) for c in candidate_lists), default=0)
    for r in range(depth):
        for cands in candidate_lists:
            if r < len(cands):
                out.append(cands[r])
    return dedup(out)


def interleaved_ndcg(candidate_lists: Sequence[Sequence[str]], gold: Iterable[str], no_gold: float = 0.0) -> float:
    """UniDoc-RL image-search reward: NDCG of the rank-interleaved candidates of all searches.

    Page ids are compared as whole strings (UniDoc-RL's released code compared characters of the
    basenames and so always scored 0; DESIGN.md).
    """
    return ndcg(interleave_by_rank(candidate_lists), gold, no_gold=no_gold)


def selection_step_reward(candidates: Sequence[str], selected: Iterable[str], gold: Iterable[str]) -> float:
    """One selection step of UniDoc-RL: was the chosen page relevant?

    When the candidates hold a gold page, the reward is the share of selected pages that are gold (the
    indicator for a single selection). When they hold none, the top-ranked candidate is the
    pseudo-positive target, so the step still teaches relative relevance instead of always scoring 0.
    """
    sel = dedup(selected)
    if not sel or not candidates:
        return 0.0
    gold_set = set(gold)
    target = gold_set if gold_set & set(candidates) else {candidates[0]}
    return sum(1 for s in sel if s in target) / len(sel)


def selection_reward(steps: Sequence[tuple[Sequence[str], Iterable[str]]], gold: Iterable[str]) -> float:
    """Mean of `selection_step_reward` over (candidates, selected) steps; 0 without selections."""
    gold_list = list(gold)
    if not steps:
        return 0.0
    return sum(selection_step_reward(c, s, gold_list) for c, s in steps) / len(steps)


def retrieval_complete(retrieved: Iterable[str], gold: Iterable[str]) -> bool:
    return set(gold) <= set(retrieved)


def first_complete_turn(search_results: Sequence[Sequence[str]], gold: Iterable[str]) -> int | None:
    """1-based index of the search after which every gold page has been seen; 0 with no gold; None if never."""
    need = set(gold)
    if not need:
        return 0
    seen: set[str] = set()
    for t, pages in enumerate(search_results, 1):
        seen.update(pages)
        if need <= seen:
            return t
    return None


def visor_retrieval_reward(search_results: Sequence[Sequence[str]], gold: Iterable[str]) -> float:
    """VISOR's verification-aware retrieval reward.

    t* = search turn at which all gold pages are first retrieved, T = number of searches, delta = T - t*:
    incomplete -> -1.0; delta 0 (no verification search) -> -0.5; delta 1 (one verification) -> 0.0;
    delta >= 2 (over-searching) -> -0.1 * delta. With no gold pages t* = 0.
    """
    t_star = first_complete_turn(search_results, gold)
    if t_star is None:
        return -1.0
    delta = len(search_results) - t_star
    if delta == 0:
        return -0.5
    if delta == 1:
        return 0.0
    return -0.1 * delta


def read_page_recall(read_pages: Iterable[str], evidence_pages: Iterable[str]) -> float:
    """MM-Doc-R1: |read ∩ evidence| / |evidence|; 1.0 when there is no evidence page to find."""
    ev = set(evidence_pages)
    if not ev:
        return 1.0
    return len(set(read_pages) & ev) / len(ev)
