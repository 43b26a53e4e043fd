"""Tag and pattern helpers (pure) the rewards' format checks read, on the assistant texts of an episode.

The checks read the text (tags, or the environment's action grammar for UniDoc-RL and EVisRAG) rather
than trusting stored actions, so the same rule scores a synthesized trajectory and a raw verl rollout
string identically.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


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
