"""The action grammar: one assistant message -> one typed `Action` (or kind "invalid" with a reason).

Pure and total: `parse_action` never raises for any string and runs in linear time (inputs are capped at
`MAX_MESSAGE_CHARS`); the parsing itself is `vrag_data.env.parse` (standard library only, what the rewards use).
`render_action` writes the canonical text of an action; `parse(render(a)) == a`.
"""

from __future__ import annotations

from vrag_data.env.grammar import GRAMMARS, Grammar
from vrag_data.env.parse import (  # noqa: F401  (limits re-exported)
    MAX_BOXES,
    MAX_INDICES,
    MAX_KEYWORDS,
    MAX_MESSAGE_CHARS,
    MAX_QUERY_CHARS,
    MAX_READ_PAGES,
    MAX_READS,
    MAX_TAGS,
    parse_fields,
)
from vrag_data.schema.records import Action


def invalid(reason: str) -> Action:
    return Action(kind="invalid", reason=reason)


def parse_action(text: str, grammar: Grammar | str) -> Action:
    """Parse one assistant message under `grammar` (an object, or a registered name). Raises only for an
    unknown grammar name (a caller bug)."""
    kind, fields = parse_fields(text, grammar)
    try:
        return Action(kind=kind, **fields)  # type: ignore[arg-type]
    except (ValueError, TypeError) as err:  # defensive: a field the record refuses is an invalid message
        return invalid(f"unparseable message ({type(err).__name__})")


from vrag_data.env.render import render_action  # noqa: E402  (re-exported: parse and render live together)

__all__ = ["GRAMMARS", "Grammar", "MAX_MESSAGE_CHARS", "invalid", "parse_action", "render_action"]
