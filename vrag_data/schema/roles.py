"""Roles: `RoleSpec` (one model role a recipe calls) and the registry of role names a run config may set.

The library's own roles (policy, judge, student, question writer) are registered here. A role a recipe brings is one
top-level `NAME = register_role(RoleSpec(...))` line (it says which kinds may play it, what `--policy oracle` fills
in for it and how the oracle answers it), found by the one discovery rule (`vrag_data.plugins`): in a module an
installed package announces under the entry-point group `vrag_data.roles`, or in a recipe module (announced under
`vrag_data.recipes`; for a package there, its modules holding the line). A recipe naming a role registered nowhere is
refused when the recipe is registered (`vrag_data.recipe.registry`). Parsing a run config asks this registry, which
discovers the roles itself: the answer does not depend on what was imported before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vrag_data.errors import ConfigError
from vrag_data.plugins import Registry, discover

ENTRY_POINT_GROUP = "vrag_data.roles"
RECIPES_GROUP = "vrag_data.recipes"  # recipe modules register the roles they bring


@dataclass(frozen=True)
class RoleSpec:
    """One model role the recipe calls: what it is for, whether the pipeline needs it, and whether it is shown page
    images (`vision`: its model must read them; `vrag_data.teacher.vision` checks the configured model).

    A role the recipe brings (not one of the library's: policy, judge, student, question writer) is registered
    (`register_role`) and says how it is played: `kinds` (the `RoleConfig.kind`s that may play it), `offline` (the role
    it plays as, `same_as`, when `--policy oracle` runs and the config leaves it unset; None: the config must set it)
    and `oracle` (how the oracle answers its requests: a function of the episode returning the reply text; None: the
    oracle's own phase of that name)."""

    name: str
    purpose: str
    required: bool = True
    vision: bool = False
    kinds: tuple[str, ...] = ("openai", "oracle")
    offline: str | None = "policy"
    oracle: Callable[[Any], str] | None = field(default=None, compare=False)

    def describe(self) -> dict[str, Any]:
        """What a run manifest records of the role (how it may be played is checked before a run: not recorded, so
        it does not change the run id)."""
        return {"name": self.name, "purpose": self.purpose, "required": self.required, "vision": self.vision}


LIBRARY_ROLE_SPECS = (
    RoleSpec("policy", "takes the actions of an episode", kinds=("openai", "oracle"), offline=None),
    RoleSpec("judge", "decides whether a final answer matches the reference", kinds=("openai", "rules"), offline=None),
    RoleSpec("student", "answers as the model to be trained does", kinds=("openai", "extractive"), offline=None),
    RoleSpec("question_writer", "writes questions from the corpus", kinds=("openai", "oracle"), offline=None),
)
LIBRARY_ROLES = tuple(s.name for s in LIBRARY_ROLE_SPECS)


def _played_alike(a: RoleSpec, b: RoleSpec) -> bool:
    """Two recipes may declare one role, each with its own purpose, as long as it is played the same way."""
    return (a.kinds, a.offline, a.oracle) == (b.kinds, b.offline, b.oracle)


def _library() -> None:
    for spec in LIBRARY_ROLE_SPECS:
        ROLES.register(spec)


class _Roles(Registry[RoleSpec]):
    def load(self) -> None:
        """The library's roles, the `vrag_data.roles` entry points, then the recipe modules (which register theirs)."""
        if self.loaded:
            return
        super().load()
        discover(RECIPES_GROUP, self.call, lambda obj, label: None, error=ConfigError, kind="recipe")


ROLES: Registry[RoleSpec] = _Roles("role", ENTRY_POINT_GROUP, lambda obj: isinstance(obj, RoleSpec), expected="RoleSpec",
                                   shipped=_library, error=ConfigError, call="register_role", same=_played_alike)


def register_role(spec: RoleSpec) -> RoleSpec:
    """Make role `spec.name` known to run configs and recipes; returns `spec` (a recipe lists it in its `roles`). A
    library role's name, or that of a role registered as played otherwise, is refused in one line."""
    if isinstance(spec, RoleSpec) and spec.name in LIBRARY_ROLES:
        raise ConfigError(f"register_role: {spec.name!r} is a library role; list RoleSpec({spec.name!r}, ...) in the "
                          "recipe's roles without registering it")
    return ROLES.register(spec)


def is_role(name: str) -> bool:
    if name in LIBRARY_ROLES or name in ROLES.items:
        return True
    ROLES.load()
    return name in ROLES.items


def role_names() -> list[str]:
    """The library's roles, then every registered role (discovered first)."""
    return [*LIBRARY_ROLES, *sorted(set(ROLES.names()) - set(LIBRARY_ROLES))]
