"""Canonical assistant text for an action (the oracle policy and augmentations write with it).

`parse_action(render_action(a, g), g) == a` for every valid action `a` the grammar can express.
"""

from __future__ import annotations

import json
from typing import Any

from vrag_data.env.grammar import Grammar, grammar_for
from vrag_data.schema.records import Action

def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def _boxes_json(boxes: list[list[float]]) -> str:
    vals = [[_num(x) for x in b] for b in boxes]
    return json.dumps(vals[0] if len(vals) == 1 else vals)


def _page(p: str) -> int | str:
    return int(p) if p.isdigit() and not p.startswith("0") else p


def _reads_json(a: Action) -> list[dict[str, Any]]:
    return [{"page_ids": [_page(p) for p in r.page_ids], "query": r.query} for r in a.reads]


def render_action(action: Action, grammar: Grammar | str) -> str:
    """The canonical message for `action`; ValueError when the grammar cannot express it."""
    g = grammar_for(grammar)
    if action.kind not in g.kinds:
        raise ValueError(f"the {g.name} grammar has no {action.kind!r} action")
    a = action
    if g.json:
        obj: dict[str, Any] = {}
        if a.thought:
            obj["think"] = a.thought
        if a.kind == "search":
            obj["search"] = a.keywords if a.keywords else a.query
        elif a.kind == "select":
            obj["select"] = a.indices
        elif a.kind == "crop":
            obj["bbox"] = json.loads(_boxes_json(a.boxes))
            if a.page_ids:
                obj["page_id"] = _page(a.page_ids[0])
        elif a.kind == "read":
            obj["read"] = _reads_json(a)
        elif a.kind == "finish":
            obj["finish"] = True
        else:
            obj["answer"] = a.answer
        return json.dumps(obj, ensure_ascii=False)
    if g.ordered:
        evidence = "\n".join(f"[{i}]: {e}" for i, e in enumerate(a.evidence, 1))
        return (
            f"<observe>\n{a.observe}\n</observe>\n<evidence>\n{evidence}\n</evidence>\n"
            f"<think>\n{a.thought}\n</think>\n<answer>{a.answer}</answer>"
        )
    head = f"<think>\n{a.thought}\n</think>\n" if a.thought else ""
    if a.kind == "search":
        body = json.dumps(a.keywords, ensure_ascii=False) if g.keyword_search else a.query
        return f"{head}<search>{body}</search>"
    if a.kind == "select":
        return f"{head}<select>{json.dumps(a.indices)}</select>"
    if a.kind == "crop":
        return f"{head}<bbox>{_boxes_json(a.boxes)}</bbox>"
    if a.kind == "read":
        return f"{head}<read>\n{json.dumps(_reads_json(a), ensure_ascii=False)}\n</read>"
    if a.kind == "finish":
        return f"{head}<FINISH>"
    return f"{head}<answer>{a.answer}</answer>"
