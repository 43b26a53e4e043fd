"""Roles are explicit: a role runs as configured, or as another role when the config says `same_as: <role>`.

Nothing is filled in. A role a recipe uses and the config leaves out stops the entry point before any work with
one line (`role_problem`); a `same_as` substitution is resolved here (`resolve_roles`) and recorded wherever the
role's work is recorded (`substitutions`: the run manifest, verdict reasons, the report, the dataset card).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vrag_data.config import RoleConfig
from vrag_data.errors import ConfigError

# What each kind can do: the judge decides correctness (a model or the rule scorers); the roles that take part
# in an episode are a model or the oracle. The student has its own check (`vrag_data.student.stage`).
_KINDS: dict[str, tuple[str, ...]] = {
    "judge": ("openai", "rules"),
    "policy": ("openai", "oracle"),
    "grounding": ("openai", "oracle"),
    "reader": ("openai", "oracle"),
    "planner": ("openai", "oracle"),
}


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


class _JudgeSpec:
    name = "judge"
    purpose = "`vrag-data filter` judges every answer"
    required = True


def _fix(role: str) -> str:
    if role == "judge":
        return "configure an endpoint, `kind: rules`, or `same_as: policy`"
    return "configure an endpoint or `same_as: policy`"


def role_problem(recipe: Any, roles: Mapping[str, RoleConfig]) -> str:
    """One line naming the first role `recipe` uses that `roles` (as configured, before resolving) leaves out or
    cannot play; "" when every role is there. The student is checked by the difficulty filters' own rule."""
    resolved = resolve_roles(roles)
    specs: list[Any] = list(getattr(recipe, "roles", ()))
    if not any(s.name == "judge" for s in specs):  # the filter stage judges every recipe's answers
        specs.append(_JudgeSpec())
    for spec in specs:
        if spec.name == "student":
            continue
        rc = resolved.get(spec.name)
        if rc is None:
            return f"roles.{spec.name}: recipe {recipe.name} uses it ({spec.purpose}); {_fix(spec.name)}"
        allowed = _KINDS.get(spec.name)
        if allowed and rc.kind not in allowed:
            how = f"same_as {rc.same_as} (kind {rc.kind})" if rc.same_as else f"kind {rc.kind}"
            return (f"roles.{spec.name}: recipe {recipe.name} uses it ({spec.purpose}) and {how} cannot do that; "
                    f"{_fix(spec.name)}" + (" (the oracle knows the gold answer: it cannot judge)" if rc.kind == "oracle" and spec.name == "judge" else ""))
    return ""


def check_roles(recipe: Any, roles: Mapping[str, RoleConfig]) -> dict[str, RoleConfig]:
    """`resolve_roles` after `role_problem` found nothing; ConfigError (exit 2) with its line otherwise."""
    problem = role_problem(recipe, roles)
    if problem:
        raise ConfigError(problem)
    return resolve_roles(roles)


def describe_roles(roles: Mapping[str, RoleConfig]) -> dict[str, str]:
    """{role: what plays it} for manifests, cards and reports: the model, `rules`, `oracle`, `extractive`, and for a
    substitution `<what> (same_as <role>)`."""
    out: dict[str, str] = {}
    for name, rc in sorted(resolve_roles(roles).items()):
        what = rc.endpoints[0].model if rc.kind == "openai" and rc.endpoints else rc.kind
        out[name] = f"{what} (same_as {rc.same_as})" if rc.same_as else what
    return out
