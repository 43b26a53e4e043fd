"""Which question writer a pipeline run uses (the flows' tasks stage and the config check share this rule).

The model writer runs when `roles.question_writer` is an endpoint; the offline writer (templates over extracted
tables and sample-corpus facts) only when the config says `tasks.generate.writer: offline`, so a run never falls
back to it silently. No writer = no generation: the tasks come from `tasks.file`, the sample corpus or the workspace.
"""

from __future__ import annotations

from typing import Literal

from vrag_data.config import RunConfig
from vrag_data.errors import ConfigError

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
