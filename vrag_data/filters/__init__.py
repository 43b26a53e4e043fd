"""Trajectory filters: score, then keep; every verdict recorded with its reason."""

from vrag_data.filters.base import FilterContext, KeepPassed, apply_chain, judges_answers, save_verdicts, verdict
from vrag_data.filters.curriculum import RlOrder, TaskSplit, rl_tasks
from vrag_data.filters.difficulty import Difficulty, difficulty_keep
from vrag_data.filters.quality import Correctness, RetrievalCompleteness, Structure
from vrag_data.filters.registry import (FILTERS, FilterChain, configure_filters, default_chain, known_filters, make_filter,
                                       register_filter)
from vrag_data.filters.setlevel import Balance, Dedup

__all__ = [
    "FILTERS",
    "Balance",
    "Correctness",
    "Dedup",
    "Difficulty",
    "FilterChain",
    "FilterContext",
    "KeepPassed",
    "RetrievalCompleteness",
    "RlOrder",
    "Structure",
    "TaskSplit",
    "apply_chain",
    "configure_filters",
    "default_chain",
    "difficulty_keep",
    "judges_answers",
    "known_filters",
    "make_filter",
    "register_filter",
    "save_verdicts",
    "rl_tasks",
    "verdict",
]
