"""Which question writer a pipeline run uses (the flows' tasks stage and the config check share this rule).

The model writer runs when `roles.question_writer` is an endpoint; the offline writer (templates over extracted
tables and sample-corpus facts) only when the config says `tasks.generate.writer: offline`, so a run never falls
back to it silently. No writer = no generation: the tasks come from `tasks.file`, the sample corpus or the workspace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from vrag_data.config import RoleConfig, RunConfig
from vrag_data.errors import ConfigError
from vrag_data.teacher.vision import one_line, recipe_shown_pages, vision_problems

if TYPE_CHECKING:
    from vrag_data.teacher.vision import ShownPages

Writer = Literal["model", "oracle"]
ROLE = "question_writer"


def planned_writer(cfg: RunConfig) -> Writer | None:
    """The writer `generate_tasks` gets, or None when the run does not generate questions."""
    asked = cfg.tasks.generate.writer
    if asked == "offline":
        return "oracle"
    from vrag_data.teacher.roles import resolve_roles

    role = resolve_roles(cfg.roles).get(ROLE)  # `same_as: policy` = the policy's endpoint
    if asked is None and role is not None and role.kind == "oracle":
        return "oracle"  # `roles.question_writer: {kind: oracle}` asks for the offline writer just as explicitly
    has_model = role is not None and role.kind == "openai" and bool(role.endpoints)
    if asked == "model" and not has_model:
        raise ConfigError("tasks.generate.writer: model needs roles.question_writer with an endpoint "
                          "({kind: openai, endpoints: [{base_url, model}]}); or set tasks.generate.writer: offline")
    return "model" if has_model else None


def shown_in_generation(roles: Mapping[str, RoleConfig], model_writer: bool) -> list[ShownPages]:
    """The roles question generation shows page images to: the model writer (the evidence pages, regions outlined)
    and the verifier's answerer (the student when it is a model, else the judge: it answers from the evidence pages
    and the competing pages, `vrag_data.qgen.verify`). Without either, the writer's own endpoint verifies."""
    from vrag_data.teacher.roles import resolve_roles
    from vrag_data.teacher.vision import ShownPages

    resolved = resolve_roles(roles)
    out = [ShownPages(ROLE, "it writes each question from the evidence pages")] if model_writer else []
    answerer = next((r for r in ("student", "judge") if r in resolved and resolved[r].kind == "openai"), None)
    if answerer is not None:
        out.append(ShownPages(answerer, "it verifies generated questions by answering them from the evidence pages"))
    return out


def check_generation_vision(roles: Mapping[str, RoleConfig], model_writer: bool) -> None:
    """ConfigError (one line, before any work) when a role question generation shows pages to has a text-only
    model (`vrag_data.teacher.vision`)."""
    from vrag_data.teacher.vision import one_line, vision_problems

    problem = one_line(vision_problems(shown_in_generation(roles, model_writer), roles))
    if problem:
        raise ConfigError(problem)


def run_vision_problem(cfg: Any, recipes: Iterable[Any]) -> str:
    """Every vision problem of a run config (`RunConfig`), as one line: the recipes' roles, and when the run
    generates questions (`planned_writer`) the roles question generation shows pages to."""
    uses = recipe_shown_pages(recipes)
    try:
        writer = planned_writer(cfg)
        if writer is not None:
            uses += shown_in_generation(cfg.roles, model_writer=writer == "model")
    except ConfigError:  # a broken same_as or writer setting is reported by the checks that own it
        pass
    return one_line(vision_problems(uses, cfg.roles))
