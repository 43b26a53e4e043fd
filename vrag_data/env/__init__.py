"""The agent environment: action grammar, geometry, tools, observations and context policies."""

from vrag_data.env.actions import GRAMMARS, parse_action, render_action
from vrag_data.env.context import AppendOnly, ContextPolicy, VisorContext, VisorPrompts
from vrag_data.env.environment import Environment, StepResult
from vrag_data.env.sanitize import sanitize_text
from vrag_data.env.settings import EnvPrompts, EnvSettings
from vrag_data.env.state import EnvState

__all__ = [
    "GRAMMARS",
    "AppendOnly",
    "ContextPolicy",
    "EnvPrompts",
    "EnvSettings",
    "EnvState",
    "Environment",
    "StepResult",
    "VisorContext",
    "VisorPrompts",
    "parse_action",
    "render_action",
    "sanitize_text",
]
