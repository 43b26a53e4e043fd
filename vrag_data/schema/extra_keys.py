"""Typed keys of a trajectory's `extra`: what a recipe's hooks record there and what a later stage reads back.

A recipe declares every key its hooks write (`Recipe.extra_keys`): its name, the type of its value and what it is
for; `note=True` for a key written with `ep.note(key, entry)` (a list of entries, each of that type). A key the
library's stages read from any recipe's trajectories (the exporter, the judge) is declared here once; a recipe that
writes it lists this object, so writer and reader share one declaration instead of a string. An episode whose
declared key holds a value of another type ends in error with one line naming the key (never exported as it is), and
`read` gives a reader the declared shape or one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExtraKey:
    name: str
    type: type | tuple[type, ...]
    purpose: str
    note: bool = False  # written with `ep.note`: a list of entries, each of `type`

    def _kind(self) -> str:
        kinds = self.type if isinstance(self.type, tuple) else (self.type,)
        return " or ".join(t.__name__ for t in kinds)

    def problem(self, value: Any) -> str:
        """"" when `value` has the declared shape, else one line naming the key, the type declared and the one found."""
        values = value if self.note and isinstance(value, list) else [value]
        if self.note and not isinstance(value, list):
            return f"extra[{self.name!r}] is a {type(value).__name__}, not a list of notes ({self._kind()} each)"
        bad = next((v for v in values if not isinstance(v, self.type) or (self.type is int and isinstance(v, bool))), None)
        if bad is None and all(isinstance(v, self.type) for v in values):
            return ""
        what = "an entry of " if self.note else ""
        return f"{what}extra[{self.name!r}] is a {type(bad).__name__}, declared {self._kind()} ({self.purpose})"

    def read(self, extra: Mapping[str, Any]) -> Any:
        """The value of this key in `extra` (None when absent); ValueError with one line when it has another type."""
        if self.name not in extra or extra[self.name] is None:
            return None
        problem = self.problem(extra[self.name])
        if problem:
            raise ValueError(problem)
        return extra[self.name]


# keys the library's stages read from whichever recipe writes them
SUFFICIENT = ExtraKey("sufficient", bool, "every gold evidence page is among the pages shown: the evidence rows' label, "
                                          "read by the exporter and the judge")
SHOWN_PAGES = ExtraKey("shown_pages", list, "page ids of the images the episode was shown, in order")
ROLE_PROMPTS = ExtraKey("role_prompts", dict, "{turn role: [messages]} for an agent with a prompt of its own: the exporter "
                                              "makes its SFT records")
LIBRARY_KEYS: dict[str, ExtraKey] = {k.name: k for k in (SUFFICIENT, SHOWN_PAGES, ROLE_PROMPTS)}


def extra_problem(keys: tuple[ExtraKey, ...], extra: Mapping[str, Any]) -> str:
    """The first key of `keys` or of the library's whose value in `extra` has another shape; "" when none."""
    for key in (*keys, *(k for name, k in LIBRARY_KEYS.items() if all(d.name != name for d in keys))):
        if key.name in extra and extra[key.name] is not None:
            problem = key.problem(extra[key.name])
            if problem:
                return problem
    return ""


def declaration_problem(keys: tuple[ExtraKey, ...]) -> str:
    """A recipe's declared keys: each name once, and a library key as the library declares it; "" when fine."""
    seen: set[str] = set()
    for key in keys:
        if key.name in seen:
            return f"extra key {key.name!r} is declared twice"
        seen.add(key.name)
        lib = LIBRARY_KEYS.get(key.name)
        if lib is not None and (lib.type, lib.note) != (key.type, key.note):
            return (f"extra key {key.name!r} is the library's ({lib.purpose}); declare it as "
                    f"vrag_data.schema.extra_keys.{key.name.upper()}")
    return ""
