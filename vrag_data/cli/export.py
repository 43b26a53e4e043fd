"""`vrag-data export`: a run's kept trajectories -> HF datasets / LLaMA-Factory / verl / EasyR1 files (or any
installed format). The entry point resolves the formats and the run's recipe; the export gets the objects."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from vrag_data.cli.common import console, fail, friendly_errors, set_option
from vrag_data.config import DEFAULT_EXPORT_FORMATS, RunConfig, load_config

if TYPE_CHECKING:
    from vrag_data.recipe.base import Recipe
    from vrag_data.store import Workspace


def run_recipes(ws: "Workspace", run_id: str, cfg: RunConfig) -> list["Recipe"]:
    """The recipes whose export hints the run may need, configured by the run config: the one its manifest names;
    a run without a manifest names its recipes only in its trajectories, so every installed recipe."""
    from vrag_data.recipe import recipe_names, resolve_recipe
    from vrag_data.recipe.runs import recipe_of_run
    from vrag_data.store.run import RunDir

    if RunDir(ws.run(run_id)).manifest() is not None:
        return [recipe_of_run(ws, run_id, cfg)]
    return [resolve_recipe(name, cfg) for name in recipe_names()]


def register(app: typer.Typer) -> None:
    @app.command("export")
    @friendly_errors
    def export_cmd(
        workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace folder"),
        run: str = typer.Option(..., "--run", help="Run id (a folder under <workspace>/runs/)"),
        formats: list[str] = typer.Option(None, "--format", help="An export format (repeatable; default: the config's): " + " | ".join(DEFAULT_EXPORT_FORMATS) + " or an installed one"),
        out: Path | None = typer.Option(None, "--out", help="Output folder (default <workspace>/exports/<run>)"),
        model_family: str | None = typer.Option(None, "--model-family", help="qwen2.5-vl | qwen3-vl (coordinates and image sizes)"),
        shard_size: int | None = typer.Option(None, "--shard-size", min=1, help="Records per shard"),
        config: Path | None = typer.Option(None, "--config", help="Run config YAML (its `export` section)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace an --out folder that holds another run's export (whole)."),
        license: str | None = typer.Option(None, "--license", help="The export's licence (SPDX id, e.g. cc-by-4.0): the card's; publishing refuses an export without one."),
        allow_research_only: bool = typer.Option(False, "--allow-research-only", help="Let push_to_hub publish sources whose licence is research-only or unknown."),
        target: str | None = typer.Option(None, "--for", help="Tune the RL rows for one trainer: `vragrl` (VRAG-RL's verl fork reads only embedded image bytes)."),
        unfiltered: bool = typer.Option(False, "--unfiltered", help="Export a run whose last filter failed or did not finish: every answered episode, without verdicts (the card and the report say so); the recipe's gate still applies."),
        sets: list[str] = set_option(),
    ) -> None:
        """Export a run's kept trajectories (SFT) and their tasks (RL) for trainers."""
        from vrag_data.export import export_run
        from vrag_data.export.formats import check_format_names
        from vrag_data.export.kept import count_trajectories
        from vrag_data.store import Workspace

        run_cfg = load_config(config, sets or ())
        cfg = run_cfg.export
        if target not in (None, "vragrl"):
            fail(f"--for {target}: the trainers with their own settings are: vragrl")
        cfg = cfg.model_copy(update={
            **({"license": license} if license else {}),
            **({"allow_research_only": True} if allow_research_only else {}),
            **({"image_mode": "bytes"} if target == "vragrl" else {}),
        })
        chosen = check_format_names(formats or list(cfg.formats))  # before any work: one line naming the known ones
        ws = Workspace(str(workspace))
        if not ws.fs.exists(ws.run(run)):
            fail(f"{ws.run(run)}: run not found; list runs under {ws.runs} or run `vrag-data synth` first")
        recipes = run_recipes(ws, run, run_cfg)
        total = count_trajectories(ws.run(run))
        from vrag_data.progress import stage_progress

        with stage_progress(f"export {run} (trajectories)", total) as step:
            summary = export_run(
                ws,
                run,
                formats=chosen,
                out_dir=out,
                model_family=model_family or cfg.model_family,
                shard_size=shard_size,
                config=cfg,
                on_trajectory=step,
                recipes=recipes,
                overwrite=overwrite,
                unfiltered=unfiltered,
                target=target,
            )
        for w in summary.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
        for fmt, counts in summary.counts.items():
            console.print(f"{fmt}: " + ", ".join(f"{k}={v}" for k, v in counts.items()), highlight=False)
        if summary.skipped:
            console.print(
                "skipped: " + ", ".join(f"{k}={v}" for k, v in summary.skipped.items()) + f" (see {summary.out_dir}/skipped.jsonl)",
                highlight=False,
            )
        console.print(f"kept {summary.n_kept}/{summary.n_trajectories} trajectories -> {summary.out_dir}", highlight=False)
        for line in summary.stats.get("dropped") or []:  # why fewer were kept, and the config keys that change it
            console.print(f"[yellow]dropped:[/] {escape(line)}", highlight=False, soft_wrap=True)
        if ws.is_local:
            from vrag_data.report import print_run_summary

            print_run_summary(ws, run, console)
