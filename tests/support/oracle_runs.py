"""One oracle run of every installed recipe over the small trainer workspace (`train_workspace`): real episodes
through each recipe and environment, in seconds, for export tests that need every recipe's rows."""

from __future__ import annotations

from pathlib import Path

from tests.support.roles import ORACLE_ROLES
from tests.support.train_workspace import build_workspace
from vrag_data.config import RoleConfig, RunConfig
from vrag_data.store import Workspace

# the offline reader stands in for the student EVisRAG's RL chain asks for
ROLES = {**ORACLE_ROLES, "student": {"kind": "extractive"}}


def oracle_runs(root: Path) -> tuple[Workspace, dict[str, str]]:
    """The workspace and recipe -> run id of its oracle run (each run has a manifest naming its recipe)."""
    from vrag_data.recipe import recipe_names, resolve_recipe
    from vrag_data.synth.run import synth

    ws, _ = build_workspace(root)
    cfg = RunConfig(workspace=str(ws.root), roles={k: RoleConfig.model_validate(v) for k, v in ROLES.items()})
    return ws, {name: synth(ws, cfg, resolve_recipe(name, cfg), progress=False).run_id for name in recipe_names()}
