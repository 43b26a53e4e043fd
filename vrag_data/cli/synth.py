"""`vrag-data synth` (teacher trajectories for one recipe) and `vrag-data filter` (judge + filters + augmentations)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from vrag_data.cli.common import console, fail, friendly_errors, set_option
from vrag_data.config import ConfigError, EndpointConfig, RoleConfig, RunConfig, load_config

if TYPE_CHECKING:  # the stage is imported when the command runs
    from vrag_data.recipe import Recipe
    from vrag_data.synth.run import RunResult

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _check_run_id(run: str | None) -> None:
    if run is not None and not _RUN_ID.match(run):
        fail(f"--run {run!r}: use letters, digits, '.', '_' or '-' (no slashes), at most 128 characters", 2)


def oracle_companions(recipe: Recipe) -> dict[str, RoleConfig]:
    """What `--policy oracle` fills in for a role of `recipe` the config leaves unset: the judge plays by the rule
    scorers, and each role the recipe calls as its `RoleSpec.offline` says (`same_as` that role; None: nothing).
    Other recipes' roles stay out: installing a recipe changes no other recipe's run."""
    from vrag_data.teacher.roles import LIBRARY_KINDS

    out = {"judge": RoleConfig(kind="rules")}
    for spec in recipe.roles:
        if spec.name not in LIBRARY_KINDS and spec.offline and spec.name not in out:
            out[spec.name] = RoleConfig(same_as=spec.offline)
    return out


def apply_policy_flags(cfg: RunConfig, policy: str | None, url: str | None, model: str | None, key_env: str | None,
                       recipe: Recipe | None = None) -> RunConfig:
    """`--policy oracle` (its companions: those of `recipe`) or `--policy-url/--policy-model` replace the config's
    policy role."""
    if policy is not None and (url or model):
        fail("give either --policy oracle or --policy-url/--policy-model, not both", 2)
    if policy is not None:
        if policy != "oracle":
            fail(f"--policy {policy!r}: the only named policy is 'oracle'; for a model use --policy-url and --policy-model", 2)
        # the offline mode, spelled out: the roles the config leaves unset are the oracle's companions, each written
        # into the run's manifest as configured (judge: the rule scorers; a role the recipe declares: as its
        # `RoleSpec.offline` says, e.g. same_as policy)
        companions = oracle_companions(recipe) if recipe is not None else {"judge": RoleConfig(kind="rules")}
        return cfg.model_copy(update={"roles": {**companions, **cfg.roles, "policy": RoleConfig(kind="oracle")}})
    if url or model:
        if not (url and model):
            fail("--policy-url and --policy-model go together (the model name as the server knows it)", 2)
        old = cfg.roles.get("policy")
        role = (old or RoleConfig()).model_copy(update={"kind": "openai", "endpoints": [EndpointConfig(base_url=url, model=model, api_key_env=key_env)]})
        return cfg.model_copy(update={"roles": {**cfg.roles, "policy": role}})
    return cfg


def _summary(workspace: Path, run_id: str) -> None:
    """The run's summary table (trajectories, verdicts, newest export) at the end of synth and filter."""
    from vrag_data.report import print_run_summary
    from vrag_data.store import Workspace

    ws = Workspace(str(workspace))
    if ws.is_local:
        print_run_summary(ws, run_id, console)


def _report_synth(workspace: Path, res: RunResult) -> None:
    """What a finished `synth` prints: its message, the commonest error causes, the run's summary and id; exit 3 when
    every episode ended in error (the stage did not do its job)."""
    console.print(res.message, highlight=False, soft_wrap=True)
    if res.stats.get("error_reasons"):
        for reason, n in sorted(res.stats["error_reasons"].items(), key=lambda kv: -kv[1])[:5]:
            console.print(f"[yellow]{n} episode(s) ended in error:[/] {escape(reason)}", highlight=False, soft_wrap=True)
    _summary(workspace, res.run_id)
    typer.echo(res.run_id)
    finished, errors = int(res.stats.get("finished", 0)), int(res.stats.get("errors", 0))
    if finished and errors == finished:
        console.print(f"error: all {finished} episode(s) of run {res.run_id} ended in error; fix the cause above and re-run "
                      "the same command (finished work is kept, failed episodes are rolled out again)", highlight=False)
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    @app.command("synth")
    @friendly_errors
    def synth_cmd(
        workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace with ingested pages and imported tasks."),
        recipe: str = typer.Option(..., "--recipe", help="A registered recipe (`vrag-data recipes` lists them)."),
        config: Path | None = typer.Option(None, "--config", help="Run config (YAML); see configs/recipes/."),
        samples: int | None = typer.Option(None, "--samples", min=1, help="Rollouts per task (default: synth.samples)."),
        limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first K tasks."),
        run: str | None = typer.Option(None, "--run", help="Run id (default: derived from recipe + roles + options; re-running resumes)."),
        policy: str | None = typer.Option(None, "--policy", help="'oracle': the gold-guided offline policy (no model); roles the config leaves unset become "
                                                       "judge: {kind: rules} and grounding/reader/planner: {same_as: policy} (recorded in the run)."),
        policy_url: str | None = typer.Option(None, "--policy-url", help="OpenAI-compatible base URL of the teacher, e.g. http://127.0.0.1:8000/v1."),
        policy_model: str | None = typer.Option(None, "--policy-model", help="Model name served at --policy-url."),
        policy_api_key_env: str | None = typer.Option(None, "--policy-api-key-env", help="Env var holding the API key of --policy-url."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        sets: list[str] = set_option(),
    ) -> None:
        """Roll out teacher trajectories for one recipe: runs/<run>/trajectories/*.parquet (resumable)."""
        from vrag_data.synth.run import synth

        from vrag_data.recipe import resolve_recipe

        _check_run_id(run)
        cfg = load_config(config, sets or ())
        try:
            rec = resolve_recipe(recipe, cfg)  # the recipe is resolved once, here, and passed down
        except ConfigError as err:
            fail(str(err).replace("unknown recipe", "unknown --recipe", 1), 2)
        cfg = apply_policy_flags(cfg, policy, policy_url, policy_model, policy_api_key_env, rec)
        res = synth(str(workspace), cfg, rec, run_id=run, samples=samples, limit=limit, progress=not quiet,
                    on_ready=lambda rid: console.print(f"run {rid}: rolling out", highlight=False))
        _report_synth(workspace, res)

    @app.command("recipes")
    @friendly_errors
    def recipes_cmd() -> None:
        """List the registered recipes: paper, grammar, the roles a run needs and the optional ones (each shown page
        images is marked: its model must read them), filters, augmentations, reward, turn budget and the options
        `synth.recipe_options.<recipe>` accepts."""
        from vrag_data.recipe import all_recipes

        for name, r in all_recipes().items():
            console.print(_recipe_line(name, r), highlight=False, soft_wrap=True)

    @app.command("filter")
    @friendly_errors
    def filter_cmd(
        workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace of the run."),
        run: str = typer.Option(..., "--run", help="Run id (as printed by `vrag-data synth`)."),
        config: Path | None = typer.Option(None, "--config", help="Run config: filter chains/options and judge role."),
        sets: list[str] = set_option(),
    ) -> None:
        """Judge (cached) + the recipe's filter chain -> runs/<run>/verdicts; augmentations -> trajectories/aug-*.parquet."""
        from vrag_data.recipe.runs import recipe_of_run
        from vrag_data.curate.postprocess import judge_and_filter

        _check_run_id(run)
        cfg = load_config(config, sets or ()) if config is not None or sets else None
        rec = recipe_of_run(str(workspace), run, cfg)  # resolved once, here, from the run's manifest
        res = judge_and_filter(str(workspace), run, cfg, rec, progress=True)
        console.print(res.message, highlight=False, soft_wrap=True)
        for line in res.drops:  # the largest drop causes and the config keys that control each (`--set` takes them)
            console.print(f"[yellow]dropped:[/] {escape(line)}", highlight=False, soft_wrap=True)
        if res.judge_errors:
            console.print(f"[yellow]{res.judge_errors} trajectory(ies) could not be judged[/] (see the correctness verdicts)")
        for line in res.augment_skipped[:10]:
            console.print(f"[dim]augmentation skipped:[/] {escape(line)}", highlight=False, soft_wrap=True)
        _summary(workspace, run)


def _recipe_line(name: str, r: Any) -> str:  # noqa: ANN401 - a Recipe (imported lazily by the commands)
    """One recipe as `vrag-data recipes` lists it: the roles a run needs as the config check demands them (those
    shown page images marked: their model must read them), the optional ones, filters, reward, budget, options."""
    from vrag_data.teacher.roles import needed_roles
    from vrag_data.teacher.vision import recipe_shown_pages

    needed = needed_roles(r)
    shown = {u.role for u in recipe_shown_pages([r])}
    optional = [x.name for x in r.roles if x.name not in needed]

    def listed(names: list[str]) -> str:
        return ", ".join(f"{n} (sees pages)" if n in shown else n for n in names) or "-"

    roles = f"needs {listed(needed)}" + (f"; optional {listed(optional)}" if optional else "")
    return (f"[bold]{name}[/] ({r.paper}): grammar {r.grammar.name}; roles: {roles}; filters "
            f"{', '.join(f.name for f in r.filters) or '-'}; augmentations "
            f"{', '.join(a.name for a in r.augmentations) or '-'}; reward {r.reward.name}; "
            f"max_turns {r.free_turns}; options {', '.join(r.options_model.model_fields)}")
