"""The agent environment: action grammar, geometry, tools, observations and context policies.

Names are imported on first use, so that `vrag_data.env.actions` / `.geometry` (which the reward entry points
need) load without the environment's search and image stack."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "GRAMMARS": "actions", "parse_action": "actions", "render_action": "actions",
    "AppendOnly": "context", "ContextPolicy": "context", "VisorContext": "context", "VisorPrompts": "context",
    "Environment": "environment", "StepResult": "environment",
    "sanitize_text": "sanitize",
    "EnvPrompts": "settings", "EnvSettings": "settings",
    "EnvState": "state",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'vrag_data.env' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"vrag_data.env.{module}"), name)
    globals()[name] = value
    return value
