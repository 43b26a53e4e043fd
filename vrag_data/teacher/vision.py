"""Roles that are shown page images need a model that reads them.

A recipe declares which of its roles are shown page images (`RoleSpec.vision`); the library declares its own (the
student the difficulty filters run, the question writer and the answerer that verifies generated questions,
`vrag_data.qgen.plan.shown_in_generation`). For each such role played by a model (kind openai; the oracle, the
offline writer, the rule scorers and the extractive reader are exempt) the model's name must look like a vision
model (`looks_like_vision`), or the config says so itself (`roles.<role>.vision: true`, for a served alias or a model
this list does not know). A name of a known text-only family is refused, and so is `vision: false` on a role that is
shown images: a text-only model declines every page-grounded question, and the stage would fail far downstream.

A name that belongs to no known family (a served alias such as `teacher`) is not judged by its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vrag_data.config import RoleConfig
from vrag_data.errors import ConfigError
from vrag_data.teacher.same_as import resolve_roles

# Families that read images, by how their names are written (lower case, the hub organisation included).
_VISION = re.compile("|".join((
    r"qwen[\d.]*-?vl", r"qvq", r"(?:^|[-_/ .])vl(?:\d|[-_ .]|$)", r"vision", r"llava", r"internvl", r"minicpm-?[vo]",
    r"pixtral", r"idefics", r"molmo", r"paligemma", r"smolvlm", r"cogvlm", r"cogagent", r"deepseek-?vl", r"janus",
    r"glm-?4(?:\.\d)?v", r"multimodal", r"llama-?4", r"gemma-?3(?!-?1b)", r"gpt-?4o", r"gpt-?4\.1", r"gpt-?4-turbo",
    r"gpt-?5", r"claude-(?!2|instant)", r"gemini", r"mistral-small-3\.[1-9]", r"mistral-small-(?:25|[4-9])",
    r"mistral-medium-3", r"kimi-vl", r"(?:^|[-_/])ovis", r"(?:^|[-_/])aria(?:-|$)", r"nvlm", r"florence", r"fuyu", r"blip", r"ui-tars",
    r"colqwen", r"docowl", r"mplug-owl",
)))
# Text-only families: a name of one of these without a vision marker above is refused where pages are shown.
_TEXT = re.compile("|".join((
    r"qwen", r"qwq", r"llama", r"mistral", r"mixtral", r"magistral", r"codestral", r"gemma", r"phi-?\d", r"gpt",
    r"claude", r"deepseek", r"(?:^|[-_/])yi-", r"internlm", r"glm", r"falcon", r"olmo", r"command-?r", r"granite",
    r"smollm", r"vicuna", r"starcoder", r"mpt-", r"baichuan", r"nemotron", r"hermes", r"zephyr", r"openchat",
    r"solar", r"dbrx", r"jamba", r"exaone", r"aya-", r"minicpm",
)))


def looks_like_vision(model: str) -> bool | None:
    """True for a vision model's name, False for a known text-only family's, None for a name of no known family
    (a served alias): judged by the name alone, hub organisation included (`Qwen/Qwen2.5-VL-7B-Instruct`)."""
    name = model.strip().lower()
    if _VISION.search(name):
        return True
    if _TEXT.search(name):
        return False
    return None


@dataclass(frozen=True)
class ShownPages:
    """A role that is shown page images, and what for (said in the refusal)."""

    role: str
    purpose: str


# Roles the library itself shows pages to, whatever the recipe: the student answers as the model to be trained
# does, from the retrieved page images (the difficulty filters run it).
STUDENT = ShownPages("student", "it answers from the retrieved page images, as the model to be trained does")


def recipe_shown_pages(recipes: Iterable[Any]) -> list[ShownPages]:
    """The roles the recipes show page images to: their own (`RoleSpec.vision`) and the student their filters
    run (`needs_roles`)."""
    from vrag_data.schema.role_need import role_needs

    out: list[ShownPages] = []
    for recipe in recipes:
        out += [ShownPages(s.name, f"recipe {recipe.name}: {s.purpose}") for s in getattr(recipe, "roles", ())
                if getattr(s, "vision", False)]
        for chain in (getattr(recipe, "filters", ()), getattr(recipe, "rl_filters", ())):
            out += [STUDENT for _, need in role_needs(chain) if need.role == STUDENT.role]
    return out


def vision_problems(uses: Sequence[ShownPages], roles: Mapping[str, RoleConfig]) -> list[str]:
    """One line per role in `uses` whose model cannot be shown pages: `vision: false`, or an endpoint's model name
    of a text-only family without `vision: true`. `roles` are resolved (`same_as` already replaced); a role that is
    not configured or is not a model (oracle, rules, extractive) is not judged here."""
    try:
        resolved = resolve_roles(roles)
    except ConfigError:  # a broken same_as is the role check's to report (`vrag_data.teacher.roles`)
        return []
    out: dict[str, str] = {}
    for use in uses:
        rc = resolved.get(use.role)
        if use.role in out or rc is None or rc.kind != "openai":
            continue
        key = f"roles.{rc.same_as}" if rc.same_as else f"roles.{use.role}"  # where the setting lives
        if rc.vision is False:
            out[use.role] = (f"{key}.vision: false, but role {use.role} is shown page images ({use.purpose}) and cannot "
                             f"work without them; name a vision model and remove vision: false")
            continue
        if rc.vision:
            continue
        text_only = [ep.model for ep in rc.endpoints if looks_like_vision(ep.model) is False]
        if text_only:
            via = f" (same_as {rc.same_as})" if rc.same_as else ""
            out[use.role] = (f"roles.{use.role}{via}: model {text_only[0]} is not a vision model, and role {use.role} "
                             f"is shown page images ({use.purpose}); name a vision model (e.g. Qwen/Qwen2.5-VL-7B-Instruct), "
                             f"or set {key}.vision: true if this model reads images")
    return list(out.values())


def one_line(problems: Sequence[str]) -> str:
    """The problems as one line ("" for none)."""
    if len(problems) <= 1:
        return "".join(problems)
    return f"{len(problems)} vision problems: " + "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))


def recipe_vision_problem(recipes: Iterable[Any], roles: Mapping[str, RoleConfig]) -> str:
    """`vision_problems` of the roles the recipes show pages to, as one line ("" when none)."""
    return one_line(vision_problems(recipe_shown_pages(recipes), roles))
