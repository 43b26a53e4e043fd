"""Roles are explicit: a role runs as configured, or as another role when the config says `same_as: <role>`.

Nothing is filled in. A role a recipe uses and the config leaves out stops the entry point before any work with
one line naming every such role (`role_problems`): the roles the recipe lists, the judge, and the roles the filters
of its SFT and RL chains need (the difficulty filters' student), so `synth` stops before it pays for an episode
that `filter` could not use. A `same_as` substitution is resolved here (`resolve_roles`) and recorded wherever the
role's work is recorded (`substitutions`: the run manifest, verdict reasons, the report, the dataset card).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vrag_data.config import RoleConfig
from vrag_data.errors import ConfigError
from vrag_data.schema.role_need import role_needs
from vrag_data.teacher.same_as import resolve_roles, substitutions  # noqa: F401  (re-exported)
from vrag_data.teacher.vision import recipe_vision_problem

# What each kind can do, for the roles the library calls: the judge decides correctness (a model or the rule
# scorers); the policy is a model or the oracle; the student answers as the model to be trained does (a model, or the
# offline reader that never sees the gold). A role a recipe brings says its own kinds (`RoleSpec.kinds`).
LIBRARY_KINDS: dict[str, tuple[str, ...]] = {
    "judge": ("openai", "rules"),
    "policy": ("openai", "oracle"),
    "student": ("openai", "extractive"),
}


def allowed_kinds(name: str, spec: Any | None = None) -> tuple[str, ...] | None:
    """The kinds that may play role `name`: the library's for its own roles, else the declaring `RoleSpec`'s."""
    if name in LIBRARY_KINDS:
        return LIBRARY_KINDS[name]
    return tuple(getattr(spec, "kinds", ()) or ()) or None


# Roles only a filter calls: needed when a configured filter of the recipe's chains says so (`needs_roles`), not
# because the recipe lists them (a difficulty filter set to `missing: keep` needs no student).
_FILTER_ROLES = ("student",)
# the config keys of each chain's filter options (`vrag_data.filters.registry.configure_filters`)
_CHAINS = (("SFT", "filters", "filters.options"), ("RL", "rl_filters", "filters.rl_options"))


class _JudgeSpec:
    name = "judge"
    purpose = "`vrag-data filter` judges every answer"
    required = True


def _fix(role: str) -> str:
    if role == "policy":
        return "set an endpoint (kind openai, endpoints: [{base_url, model}]) or `kind: oracle`"
    if role == "judge":
        return "configure an endpoint, `kind: rules`, or `same_as: policy`"
    if role == "student":
        return "set roles.student (an endpoint: the model to be trained), or `roles.student: {kind: extractive}` (the offline reader)"
    return "configure an endpoint or `same_as: policy`"


def _spec_problems(recipes: Sequence[Any], resolved: Mapping[str, RoleConfig]) -> dict[str, str]:
    """{role: line} for the roles the recipes list (`Recipe.roles`, and the judge every recipe's answers need) that
    are left out or cannot play their part; the first recipe is named, the others after it."""
    users: dict[str, list[tuple[Any, Any]]] = {}
    for recipe in recipes:
        specs: list[Any] = list(getattr(recipe, "roles", ()))
        if not any(s.name == "judge" for s in specs):  # the filter stage judges every recipe's answers
            specs.append(_JudgeSpec())
        for spec in specs:
            if spec.name not in _FILTER_ROLES:
                users.setdefault(spec.name, []).append((recipe, spec))
    out: dict[str, str] = {}
    for name, used in users.items():
        (recipe, spec), others = used[0], sorted({r.name for r, _ in used[1:]} - {used[0][0].name})
        also = f", as do recipe(s) {', '.join(others)}" if others else ""
        rc = resolved.get(name)
        if rc is None:
            out[name] = f"roles.{name}: recipe {recipe.name} uses it ({spec.purpose}){also}; {_fix(name)}"
            continue
        allowed = allowed_kinds(name, spec)
        if allowed and rc.kind not in allowed:
            how = f"same_as {rc.same_as} (kind {rc.kind})" if rc.same_as else f"kind {rc.kind}"
            out[name] = (f"roles.{name}: recipe {recipe.name} uses it ({spec.purpose}){also} and {how} cannot do that; "
                         f"{_fix(name)}" + (" (the oracle knows the gold answer: it cannot judge)" if rc.kind == "oracle" and name == "judge" else ""))
    return out


def _need_problems(recipes: Sequence[Any], resolved: Mapping[str, RoleConfig], skip: Sequence[str]) -> dict[str, str]:
    """{role: line} for the roles the filters of the recipes' SFT and RL chains need (`needs_roles`) that are left
    out or cannot play their part; each line names every filter that needs the role, and its waiver."""
    needers: dict[str, dict[tuple[str, str], list[tuple[str, str]]]] = {}  # role -> (recipe, filter) -> [(chain, waiver key)]
    for recipe in recipes:
        for chain, attr, key in _CHAINS:
            for fname, need in role_needs(getattr(recipe, attr, ())):
                waiver = f"{key}.{recipe.name}.{fname}.{need.waiver}" if need.waiver else ""
                needers.setdefault(need.role, {}).setdefault((recipe.name, fname), []).append((chain, waiver))
    out: dict[str, str] = {}
    for role, by_filter in needers.items():
        rc = resolved.get(role)
        allowed = allowed_kinds(role)
        if role in skip or (rc is not None and (not allowed or rc.kind in allowed)):
            continue
        who = "; ".join(f"filter {f} of recipe {r}'s {' and '.join(c for c, _ in chains)} chain{'s' if len(chains) > 1 else ''}"
                        for (r, f), chains in by_filter.items())
        if rc is None:
            what = "is not configured"
        else:
            how = f"same_as {rc.same_as} (kind {rc.kind})" if rc.same_as else f"kind {rc.kind}"
            what = f"is {how}, which cannot play it"
        waivers = [w for chains in by_filter.values() for _, w in chains if w]
        skip_it = f", or set {' and '.join(waivers)} to run without it (recorded in every verdict)" if waivers else ""
        out[role] = f"role '{role}' (needed by {who}) {what}; {_fix(role)}{skip_it}"
    return out


def role_problems(recipes: Sequence[Any], roles: Mapping[str, RoleConfig]) -> list[str]:
    """One line per role that `recipes` need and `roles` (as configured, before resolving) leaves out or that cannot
    play its part: the roles each recipe lists (`Recipe.roles`; the judge, which `vrag-data filter` needs for every
    recipe) and the roles the filters of its SFT and RL chains need (`needs_roles`, from the filters' settings, so
    a waived rule needs nothing). Each line names the role, who needs it and the config key that fixes it; [] when
    every role is there. A `same_as` substitution plays the role it names (its kind decides)."""
    bad = _same_as_problems(roles)
    resolved = resolve_roles({k: v for k, v in roles.items() if k not in bad})
    specs = {k: v for k, v in _spec_problems(recipes, resolved).items() if k not in bad}
    return [*specs.values(), *bad.values(), *_need_problems(recipes, resolved, skip=(*specs, *bad)).values()]


def needed_roles(recipe: Any) -> list[str]:
    """The roles a run of `recipe` cannot start without, as the config check demands them (`role_problems` against an
    empty config): the policy, every role the recipe lists, the judge, and the roles its filters need."""
    return list(dict.fromkeys(["policy", *_spec_problems([recipe], {}), *_need_problems([recipe], {}, skip=())]))


def _same_as_problems(roles: Mapping[str, RoleConfig]) -> dict[str, str]:
    """{role: line} for every `same_as` that names no configured role or a substitution (all of them, not the first)."""
    out: dict[str, str] = {}
    plain = {k: v for k, v in roles.items() if v.same_as is None}
    for name, rc in roles.items():
        if rc.same_as is None:
            continue
        try:
            resolve_roles({**plain, name: rc, **({rc.same_as: roles[rc.same_as]} if rc.same_as in roles else {})})
        except ConfigError as err:
            out[name] = str(err)
    return out


def one_line(problems: Sequence[str]) -> str:
    """The problems as one line: the problem itself when there is one, numbered otherwise; "" for none."""
    if len(problems) <= 1:
        return "".join(problems)
    return f"{len(problems)} role problems: " + "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))


def role_problem(recipe: Any, roles: Mapping[str, RoleConfig]) -> str:
    """Every role problem of `recipe` (`role_problems`) as one line; "" when every role is there."""
    return one_line(role_problems([recipe], roles))


def roles_called(recipe: Any) -> list[str]:
    """The roles a run of `recipe` calls: those it lists (`Recipe.roles`), the judge (`vrag-data filter` judges every
    recipe's answers) and those the filters of its SFT and RL chains need (`needs_roles`), in that order."""
    names = [s.name for s in getattr(recipe, "roles", ())] + ["judge"]
    for _, attr, _ in _CHAINS:
        names += [need.role for _, need in role_needs(getattr(recipe, attr, ()))]
    return list(dict.fromkeys(names))


def roles_for(recipe: Any, roles: Mapping[str, RoleConfig]) -> dict[str, RoleConfig]:
    """The configured roles a run of `recipe` holds (as configured, `same_as` kept): the roles it calls
    (`roles_called`) and the roles they are `same_as`; another recipe's roles in a shared config stay out of the
    run's manifest and run id."""
    called = roles_called(recipe)
    keep = set(called) | {roles[r].same_as for r in called if r in roles and roles[r].same_as}
    return {k: v for k, v in roles.items() if k in keep}


def check_roles(recipe: Any, roles: Mapping[str, RoleConfig]) -> dict[str, RoleConfig]:
    """The roles `recipe` calls (`roles_for`), `same_as` resolved, after `role_problem` found nothing; ConfigError
    (exit 2) with its line otherwise."""
    problem = role_problem(recipe, roles) or recipe_vision_problem([recipe], roles)  # and a model for each role shown pages
    if problem:
        raise ConfigError(problem)
    called = set(roles_called(recipe))
    return {k: v for k, v in resolve_roles(roles_for(recipe, roles)).items() if k in called}


def describe_roles(roles: Mapping[str, RoleConfig]) -> dict[str, str]:
    """{role: what plays it} for manifests, cards and reports: the model, `rules`, `oracle`, `extractive`, and for a
    substitution `<what> (same_as <role>)`."""
    out: dict[str, str] = {}
    for name, rc in sorted(resolve_roles(roles).items()):
        what = rc.endpoints[0].model if rc.kind == "openai" and rc.endpoints else rc.kind
        out[name] = f"{what} (same_as {rc.same_as})" if rc.same_as else what
    return out
