"""Role names -> `RoleSpec`s: the roles a run config may set and a recipe may call.

The library's own roles (policy, judge, student, question writer) are registered here. A role a recipe brings is one
`register_role(RoleSpec(...))` line (it says which kinds may play it, what `--policy oracle` fills in for it and how
the oracle answers it), found by the one discovery rule (`vrag_data.plugins`): in a recipe module (the recipes'
discovery imports it), or in a module an installed package announces under the entry-point group `vrag_data.roles`.
A recipe naming a role registered nowhere is refused when the recipe is registered (`vrag_data.recipe.registry`).
"""

from __future__ import annotations

from vrag_data.errors import ConfigError
from vrag_data.plugins import Registry
from vrag_data.recipe.spec import RoleSpec

ENTRY_POINT_GROUP = "vrag_data.roles"

LIBRARY_ROLE_SPECS = (
    RoleSpec("policy", "takes the actions of an episode", kinds=("openai", "oracle"), offline=None),
    RoleSpec("judge", "decides whether a final answer matches the reference", kinds=("openai", "rules"), offline=None),
    RoleSpec("student", "answers as the model to be trained does", kinds=("openai", "extractive"), offline=None),
    RoleSpec("question_writer", "writes questions from the corpus", kinds=("openai", "oracle"), offline=None),
)


def _played_alike(a: RoleSpec, b: RoleSpec) -> bool:
    """Two recipes may declare one role with their own purpose, as long as it is played the same way."""
    return (a.kinds, a.offline, a.oracle) == (b.kinds, b.offline, b.oracle)


def _library() -> None:
    for spec in LIBRARY_ROLE_SPECS:
        ROLES.register(spec)


ROLES: Registry[RoleSpec] = Registry("role", ENTRY_POINT_GROUP, lambda obj: isinstance(obj, RoleSpec), expected="RoleSpec",
                                     shipped=_library, error=ConfigError, call="register_role", same=_played_alike)


def register_role(spec: RoleSpec) -> RoleSpec:
    """Make role `spec.name` known to run configs and recipes; returns `spec` (a recipe lists it in its `roles`).
    The name of a library role, or of a role registered as played otherwise, is refused in one line."""
    library = {s.name for s in LIBRARY_ROLE_SPECS}
    if isinstance(spec, RoleSpec) and spec.name in library and not any(s is spec for s in LIBRARY_ROLE_SPECS):
        # a recipe's own description of a library role (its purpose) is not a registration
        return spec
    ROLES.register(spec)
    return spec


def is_role(name: str) -> bool:
    ROLES.load()
    return name in ROLES.items


def role_names() -> list[str]:
    """The library's roles, then every registered role, after the recipes' discovery (which registers the roles the
    recipe modules bring): the same answer whatever was imported before."""
    from vrag_data.recipe.registry import recipe_names

    recipe_names()
    library = [s.name for s in LIBRARY_ROLE_SPECS]
    return [*library, *sorted(set(ROLES.names()) - set(library))]
