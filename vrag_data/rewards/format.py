"""Format / pattern checks per recipe (pure), on the assistant texts of an episode.

The checks read the text (tags, or the environment's action grammar for UniDoc-RL and EVisRAG) rather
than trusting stored actions, so the same rule scores a synthesized trajectory and a raw verl rollout
string identically.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vrag_data.env.parse import action_kind
from vrag_data.env.grammar import OBSERVE_EVIDENCE_ANSWER, REACT_SELECT_CROP

_ACTION_RE = re.compile(r"<(search|select|bbox|crop|read|answer)>(.*?)</\1>", re.S)


def tag_contents(text: str, tag: str) -> list[str]:
    """Contents of every complete `<tag>...</tag>` in order."""
    return [m.strip() for m in re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.S)]


def last_tag(text: str, tag: str) -> str | None:
    found = tag_contents(text, tag)
    return found[-1] if found else None


def balanced(text: str, tags: Sequence[str]) -> bool:
    """Every opening tag has its closing tag (truncated or doubled tags fail)."""
    return all(text.count(f"<{t}>") == text.count(f"</{t}>") for t in tags)


def action_sequence(text: str) -> list[tuple[str, str]]:
    """(tag, content) of every complete action tag in order of appearance."""
    return [(m.group(1), m.group(2).strip()) for m in _ACTION_RE.finditer(text)]


def vrag_rl_format(texts: Sequence[str]) -> float:
    """VRAG-RL pattern reward / gate: the episode holds a complete <search> and a complete <answer>."""
    joined = "\n".join(texts)
    ok = bool(tag_contents(joined, "search")) and bool(tag_contents(joined, "answer"))
    return float(ok and balanced(joined, ("search", "answer")))


def unidoc_rl_format(texts: Sequence[str]) -> float:
    """UniDoc-RL pattern reward: every assistant turn parses under the unidoc_rl action grammar (exactly one
    of <search>, <select>, <bbox>, <answer>; balanced, non-empty, un-nested tags) and the episode ends
    with an answer."""
    if not texts:
        return 0.0
    kinds = [action_kind(t, REACT_SELECT_CROP) for t in texts]
    return float(all(k != "invalid" for k in kinds) and kinds[-1] == "answer")


def visor_format_invalid(texts: Sequence[str]) -> bool:
    """VISOR's format indicator (eq. 3): 1 (invalid) when the trajectory invokes no search before its answer
    action. A trajectory that never answers has no answer action to violate the rule: its reward comes from the
    answer (0) and retrieval terms alone."""
    seen_search = False
    for t in texts:
        for tag, _ in action_sequence(t):
            if tag == "search":
                seen_search = True
            elif tag == "answer":
                return not seen_search
    return False


def evisrag_format(text: str) -> float:
    """EVisRAG format reward: <observe>, <evidence>, <think>, <answer> each exactly once, in this order, with
    numbered evidence lines (the evisrag action grammar)."""
    return float(bool(text.strip()) and action_kind(text, OBSERVE_EVIDENCE_ANSWER) != "invalid")


_EVIDENCE_LINE = re.compile(r"\[(\d+)\]\s*:\s*(.*?)(?=\n\s*\[\d+\]\s*:|\Z)", re.S)


def parse_evidence(block: str) -> dict[int, str]:
    """`[i]: text` lines of an <evidence> block -> {i: text} (1-based image index)."""
    return {int(i): t.strip() for i, t in _EVIDENCE_LINE.findall(block)}


def evidence_map(lines: Sequence[str]) -> dict[int, str]:
    """Evidence of an Action: the grammar stores one plain line per image (index = position); lines that
    still carry their `[i]:` prefix are read by that number."""
    if any(re.match(r"\s*\[\d+\]\s*:", x) for x in lines):
        return parse_evidence("\n".join(lines))
    return {i: x.strip() for i, x in enumerate(lines, 1)}


def recipe_format(recipe: str, texts: Sequence[str]) -> float:
    """The recipe's format score in [0, 1] (VISOR: 1 - invalid indicator)."""
    if recipe == "vrag_rl":
        return vrag_rl_format(texts)
    if recipe == "unidoc_rl":
        return unidoc_rl_format(texts)
    if recipe == "visor":
        return 0.0 if visor_format_invalid(texts) else 1.0
    if recipe == "evisrag":
        return evisrag_format(texts[-1] if texts else "")
    if recipe == "mmdoc_r1":
        joined = "\n".join(texts)
        return float(bool(tag_contents(joined, "answer")))
    raise ValueError(f"unknown recipe {recipe!r}; known: vrag_rl, unidoc_rl, visor, evisrag, mmdoc_r1")
