"""`same_as`: a role that stands for another configured role (`roles.grounding: {same_as: policy}`)."""

from __future__ import annotations

from collections.abc import Mapping

from vrag_data.config import RoleConfig
from vrag_data.errors import ConfigError


def resolve_roles(roles: Mapping[str, RoleConfig]) -> dict[str, RoleConfig]:
    """The configured roles, each `same_as: X` replaced by a copy of role X that keeps `same_as` (so whoever reads
    the role sees the substitution). Raises ConfigError for a `same_as` naming an unconfigured role or a chain."""
    out: dict[str, RoleConfig] = {}
    for name, rc in roles.items():
        if rc.same_as is None:
            out[name] = rc
            continue
        target = roles.get(rc.same_as)
        if target is None:
            raise ConfigError(f"roles.{name}.same_as: {rc.same_as!r} is not a configured role; configure roles.{rc.same_as} "
                              f"or name a role the config has ({', '.join(sorted(r for r in roles if r != name)) or 'none'})")
        if target.same_as is not None:
            raise ConfigError(f"roles.{name}.same_as: roles.{rc.same_as} is itself same_as {target.same_as}; "
                              f"name the role it stands for directly")
        # model_copy does not validate: the copy holds the target's settings and the marker side by side
        out[name] = target.model_copy(deep=True, update={"same_as": rc.same_as})
    return out


def substitutions(roles: Mapping[str, RoleConfig]) -> dict[str, str]:
    """{role: the role it is the same as} for every configured substitution."""
    return {name: rc.same_as for name, rc in sorted(roles.items()) if rc.same_as}
