"""Action grammars as objects: which tags a message may hold, which of them are actions, and how contents read.

The library defines grammars by their shape (ReAct with a crop, ReAct with select + crop, think-first ReAct,
the one-turn observe/evidence/think/answer form, keyword search + read + FINISH, and a JSON form); a recipe
picks one (usually under its own name, via `dataclasses.replace(..., name=...)`) and registers it with the
recipe. `grammar_for(name)` resolves a registered name, for callers that only hold a stored name.
"""

from __future__ import annotations

from dataclasses import dataclass

# tag -> action kind (tags not listed are not actions: think, observe, evidence)
TAG_KIND: dict[str, str] = {"search": "search", "select": "select", "bbox": "crop", "region": "crop", "answer": "answer",
                            "read": "read", "FINISH": "finish"}


@dataclass(frozen=True)
class Grammar:
    name: str
    tags: frozenset[str] = frozenset()  # legal tags (besides <think> when listed)
    actions: frozenset[str] = frozenset()  # tags that are actions; exactly one per message
    think_required: bool = False  # every message starts with <think>
    ordered: tuple[str, ...] = ()  # every one of these, exactly once, in this order (one-turn evidence form)
    keyword_search: bool = False  # <search> holds a JSON list of keywords instead of a free-text query
    json: bool = False  # one JSON object per message ({"think": ..., "search": ...})

    @property
    def kinds(self) -> frozenset[str]:
        """Action kinds the grammar can express (what `render_action` accepts)."""
        if self.json:
            return frozenset({"search", "select", "crop", "read", "finish", "answer"})
        return frozenset(TAG_KIND[t] for t in self.actions)


def _g(name: str, tags: set[str], actions: set[str], **kw: object) -> Grammar:
    return Grammar(name, frozenset(tags), frozenset(actions), **kw)  # type: ignore[arg-type]


# ReAct: think, then search / crop (<bbox>, also written <region>) / answer
REACT_CROP = _g("react_crop", {"think", "search", "bbox", "region", "answer"}, {"search", "bbox", "region", "answer"})
# ReAct with a rerank step: search -> select -> bbox -> answer
REACT_SELECT_CROP = _g("react_select_crop", {"think", "search", "select", "bbox", "answer"}, {"search", "select", "bbox", "answer"})
# ReAct where every message must start with <think>
THINK_FIRST_CROP = _g("think_first_crop", {"think", "search", "bbox", "answer"}, {"search", "bbox", "answer"}, think_required=True)
# one turn: <observe> <evidence> <think> <answer>, each once, in this order
OBSERVE_EVIDENCE_ANSWER = _g("observe_evidence_answer", {"observe", "evidence", "think", "answer"}, {"answer"},
                             ordered=("observe", "evidence", "think", "answer"))
# keyword search (JSON list), read pages for a sub-query (JSON), FINISH; an answer agent answers
KEYWORD_READ_FINISH = _g("keyword_read_finish", {"think", "search", "read", "FINISH", "answer"},
                         {"search", "read", "FINISH", "answer"}, keyword_search=True)
# JSON objects such as {"think": ..., "search": ...}
JSON_ACTIONS = Grammar("json", json=True)

_REGISTERED: dict[str, Grammar] = {g.name: g for g in (REACT_CROP, REACT_SELECT_CROP, THINK_FIRST_CROP,
                                                        OBSERVE_EVIDENCE_ANSWER, KEYWORD_READ_FINISH, JSON_ACTIONS)}
GRAMMARS = _REGISTERED  # live view: the library's shapes plus every grammar a recipe registered


def register_grammar(grammar: Grammar) -> Grammar:
    """Make `grammar` resolvable by its name; a different grammar under a taken name is a bug."""
    old = _REGISTERED.get(grammar.name)
    if old is not None and old != grammar:
        raise ValueError(f"grammar {grammar.name!r} is already registered with different rules")
    _REGISTERED[grammar.name] = grammar
    return grammar


def grammar_for(grammar: "Grammar | str") -> Grammar:
    """The grammar object itself, or the registered grammar of that name (ValueError when unknown)."""
    if isinstance(grammar, Grammar):
        return grammar
    g = _REGISTERED.get(grammar)
    if g is None:
        raise ValueError(f"unknown grammar {grammar!r}; expected one of {sorted(_REGISTERED)}")
    return g


def describe_grammar(g: Grammar) -> dict[str, object]:
    """The grammar as plain data (what a run manifest records); `grammar_from_description` reads it back."""
    return {"name": g.name, "tags": sorted(g.tags), "actions": sorted(g.actions), "think_required": g.think_required,
            "ordered": list(g.ordered), "keyword_search": g.keyword_search, "json": g.json}


def grammar_from_description(d: dict) -> Grammar:
    """The grammar a manifest describes (`describe_grammar`), so a copied run is parsed by the rules it was made
    with, without the recipe's code."""
    return Grammar(str(d["name"]), frozenset(d.get("tags") or ()), frozenset(d.get("actions") or ()),
                   think_required=bool(d.get("think_required")), ordered=tuple(d.get("ordered") or ()),
                   keyword_search=bool(d.get("keyword_search")), json=bool(d.get("json")))
