"""The recipe of an existing run, for the entry points that act on a run by id (`filter`, `export`, `report`).

A run's manifest records the recipe's name; an entry point resolves it here once (through the registry, with the
run config's options) and hands the object to the stage. Stages never do this themselves.
"""

from __future__ import annotations


from vrag_data.config import RunConfig
from vrag_data.errors import ConfigError, VragError
from vrag_data.recipe.base import Recipe
from vrag_data.recipe.registry import get_recipe, recipe_names, resolve_recipe
from vrag_data.store.run import RunDir
from vrag_data.store.workspace import Workspace


def recipe_of_run(ws: Workspace | str, run_id: str, cfg: RunConfig | None = None) -> Recipe:
    """The configured recipe that wrote `runs/<run_id>` (one line naming the run folder when it has no manifest)."""
    ws = ws if isinstance(ws, Workspace) else Workspace(str(ws))
    manifest = RunDir(ws.run(run_id)).manifest()
    if manifest is None:
        raise VragError(f"{ws.run(run_id)}: no run manifest; run `vrag-data synth -w {ws.root} --recipe R --run {run_id}` first")
    # a recipe named by reference (`module:ATTR`) in the run's config is loaded the same way again
    refs = [r for r in ((manifest.config.get("synth") or {}).get("recipes") or []) if isinstance(r, str) and ":" in r]
    failed: list[str] = []
    for ref in refs if manifest.recipe not in recipe_names() else []:
        try:
            get_recipe(ref)
        except ConfigError as err:
            failed.append(str(err))  # another reference of the config may be the run's recipe
    if manifest.recipe not in recipe_names() and failed:
        raise ConfigError(f"run {run_id} was written by recipe {manifest.recipe!r}, which is not registered here; {failed[0]}")
    return resolve_recipe(manifest.recipe, cfg)


def recipe_to_train(rl_recipe: str | None) -> Recipe:
    """The recipe the RL trainer rolls out (`rl.recipe` of a train config), for the trainer's entry points."""
    if not rl_recipe:
        raise VragError("rl.recipe: name the recipe to roll out (e.g. `recipe: vrag_rl` under `rl:` in the train config)")
    return resolve_recipe(rl_recipe)
