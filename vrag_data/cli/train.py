"""`vrag-data train sft|rl`: the bundled trainer (tiny CPU model for tests, Qwen2-VL / Qwen2.5-VL on GPUs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from vrag_data.cli.common import console, friendly_errors, set_option

ConfigOpt = typer.Option(..., "--config", "-c", help="Train config YAML (see configs/train/).")
DataOpt = typer.Option(None, "--data", help="SFT: an SFT export; RL: an RL export selecting tasks (optional).")
WsOpt = typer.Option(None, "--workspace", "-w", help="Workspace with corpus, tasks and index (RL).")
StepsOpt = typer.Option(None, "--max-steps", help="Override the number of optimiser steps.")
OutOpt = typer.Option(None, "--output", "-o", help="Output folder (checkpoints, final model, logs).")
ResumeOpt = typer.Option(True, "--resume/--no-resume", help="Continue from the last checkpoint in --output.")
SetOpt = set_option()


# the configs this checkout ships (configs/train/...), next to the package
SHIPPED_ROOT = Path(__file__).resolve().parents[2]


def resolve_config(config: Path) -> Path:
    """`config` as given when it exists (or is absolute); a relative path that is not under the working directory is
    looked up among the shipped configs (`configs/train/X.yaml`, or a bare `X.yaml` in `configs/train/`), so the
    README's commands run from any folder. Neither there: one line naming both places."""
    from vrag_data.config import ConfigError

    if config.is_absolute() or config.exists():
        return config
    shipped = [SHIPPED_ROOT / config, SHIPPED_ROOT / "configs" / "train" / config]
    for candidate in shipped:
        if candidate.is_file():
            return candidate
    raise ConfigError(f"train config {config}: not found in the working directory ({Path.cwd()}) nor among the shipped "
                      f"configs ({SHIPPED_ROOT / 'configs' / 'train'}); pass the path of an existing file")


def _load(config: Path, data: str | None, workspace: str | None, output: str | None, sets: list[str] | None = None):
    from vrag_data.train.config import load_train_config

    cfg = load_train_config(resolve_config(config), sets or ())
    upd: dict = {}
    if data is not None:
        cfg.data = cfg.data.model_copy(update={"path": data})
    if workspace is not None:
        upd["workspace"] = workspace
    if output is not None:
        upd["output_dir"] = output
    return cfg.model_copy(update=upd)


def register(app: typer.Typer) -> None:
    train = typer.Typer(help="Train on the exported data: SFT, then GRPO / RS-GRPO / SPO in the environment.",
                        no_args_is_help=True)

    @train.command("sft")
    @friendly_errors
    def sft_cmd(config: Path = ConfigOpt, data: Optional[str] = DataOpt, workspace: Optional[str] = WsOpt,
                max_steps: Optional[int] = StepsOpt, output: Optional[str] = OutOpt, resume: bool = ResumeOpt,
                sets: Optional[list[str]] = SetOpt) -> None:
        """Supervised fine-tuning on an SFT export (loss on assistant turns only)."""
        from vrag_data.train.sft import describe, run_sft

        cfg = _load(config, data, workspace, output, sets)
        if max_steps is not None:
            cfg.sft = cfg.sft.model_copy(update={"max_steps": max_steps})
        result = run_sft(cfg, resume=resume, progress=True)
        if result.nothing_to_do:
            console.print(f"nothing to do: {result.output_dir} already holds the finished model of this config (final/, "
                          f"step {result.global_step}); pass --no-resume to train again", highlight=False)
        for reason in result.skipped[:5]:
            console.print(f"skipped: {reason}", highlight=False)
        if os.environ.get("RANK", "0") == "0":  # one summary line under torchrun / accelerate launch
            typer.echo(json.dumps(describe(result)))

    @train.command("rl")
    @friendly_errors
    def rl_cmd(config: Path = ConfigOpt, data: Optional[str] = DataOpt, workspace: Optional[str] = WsOpt,
               estimator: Optional[str] = typer.Option(None, "--estimator", help="grpo | rs_grpo | spo"),
               max_steps: Optional[int] = StepsOpt, output: Optional[str] = OutOpt, resume: bool = ResumeOpt,
               sets: Optional[list[str]] = SetOpt,
               engine: str = typer.Option("bundled", "--engine", help="bundled (this trainer) | verl (verl's Ray "
                                          "trainer with this project's agent loop; writes OUTPUT/verl/vrag_ppo.yaml)"),
               dry_run: bool = typer.Option(False, "--dry-run", help="--engine verl: write verl's config, start nothing."),
               ray_address: Optional[str] = typer.Option(None, "--ray-address", help="--engine verl: the Ray cluster "
                                                          "(default: RAY_ADDRESS, a cluster on this machine, else a local one)")) -> None:
        """Multi-turn RL with rollouts in the environment and rewards from the recipe's reward spec."""
        from vrag_data.config import ConfigError
        from vrag_data.recipe.runs import recipe_to_train
        from vrag_data.train.rl import run_rl

        cfg = _load(config, data, workspace, output, sets)
        upd: dict = {}
        if estimator is not None:
            if estimator not in ("grpo", "rs_grpo", "spo"):
                raise ConfigError(f"--estimator {estimator!r}: use grpo, rs_grpo or spo")
            upd["estimator"] = estimator
        if max_steps is not None:
            upd["max_steps"] = max_steps
        cfg.rl = cfg.rl.model_copy(update=upd)
        if engine not in ("bundled", "verl"):
            raise ConfigError(f"--engine {engine!r}: use bundled or verl")
        if dry_run and engine != "verl":
            raise ConfigError("--dry-run writes verl's config: add --engine verl")
        if engine == "verl":
            from vrag_data.train.verl_config import launch_verl, write_verl_config

            recipe_to_train(cfg.rl.recipe)  # an unknown recipe stops here, not on the cluster
            files = write_verl_config(cfg, data)
            typer.echo(json.dumps({"engine": "verl", "config": str(files.trainer), "agent_loop": str(files.agent_loop),
                                   "command": " ".join(files.command()) if dry_run else None}))
            if not dry_run:
                code = launch_verl(files, ray_address)
                if code:
                    raise typer.Exit(code)
            return
        result = run_rl(cfg, recipe_to_train(cfg.rl.recipe), resume=resume, progress=True)
        last = result.logs[-1].__dict__ if result.logs else {}
        if os.environ.get("RANK", "0") != "0":
            return
        typer.echo(json.dumps({"output_dir": str(result.output_dir), "global_step": result.global_step,
                               "resumed_from": result.resumed_from, "last": last}))

    app.add_typer(train, name="train")
