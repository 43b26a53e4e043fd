"""Training targets are rendered from their parse, never copied from the reply.

An assistant turn becomes a target through the recipe's grammar: the reply is parsed (as the environment parsed it
when it acted on it), every text field of the action (thought, query, keywords, answer, observation, evidence lines,
read queries, page ids) is normalised by the allowlist (`vrag_data.inert.sanitize_text`: no tag of any kind inside a
field), and the action is written back by `render_action`: only the grammar's tags, in the grammar's order. What the
model wrote outside the tags cannot reach a target: the parser refuses such a reply (the environment answered it with
its error prompt, and the export gate drops or refuses a rejected turn). A rejected turn that a recipe trains on (a
retry) has no parse: its text is the allowlist's rendering with the grammar's own tags allowed.

`Rendered.changed` says whether the target differs from the stored reply beyond whitespace (characters dropped,
markup made inert, a field re-encoded): the export counts such targets per recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from vrag_data.env.actions import parse_action
from vrag_data.env.grammar import Grammar
from vrag_data.env.render import render_action
from vrag_data.inert import live_markup, normalize_chars, sanitize_text
from vrag_data.schema.records import Action, ReadRequest


@dataclass(frozen=True)
class Rendered:
    text: str
    changed: bool  # differs from the reply beyond whitespace


def clean_action(a: Action) -> Action:
    """`a` with every text field normalised by the allowlist (no tag allowed inside a field)."""
    s = sanitize_text
    return a.model_copy(update={
        "thought": s(a.thought), "query": s(a.query), "answer": s(a.answer), "observe": s(a.observe),
        "keywords": [s(k) for k in a.keywords], "evidence": [s(e) for e in a.evidence],
        "page_ids": [s(p) for p in a.page_ids],
        "reads": [ReadRequest(page_ids=[s(p) for p in r.page_ids], query=s(r.query)) for r in a.reads],
    })


def _squash(text: str) -> str:
    return "".join(text.split())


def render_target(reply: str, grammar: Grammar) -> Rendered:
    """The training target of one assistant reply under `grammar` (see the module doc)."""
    action = parse_action(reply, grammar)
    if action.kind == "invalid":
        text = sanitize_text(reply, allowed=grammar.tags)
    else:
        text = render_action(clean_action(action), grammar)
    return Rendered(text, _squash(text) != _squash(reply))


def field_markup(reply: str, grammar: Grammar) -> str:
    """The first field of a parsed reply that holds markup (a tag of any kind, a look-alike, a chat token), described
    in one phrase; '' when none (or when the reply does not parse)."""
    a = parse_action(reply, grammar)
    if a.kind == "invalid":
        return ""
    fields = [("thought", a.thought), ("query", a.query), ("answer", a.answer), ("observation", a.observe),
              *(("keyword", k) for k in a.keywords), *(("evidence line", e) for e in a.evidence),
              *(("read query", r.query) for r in a.reads)]
    for name, value in fields:
        live = live_markup(normalize_chars(value))
        if live:
            return f"its {name} holds the markup {sanitize_text(live)!r}"
    return ""
