"""`vrag-data train rl --engine verl`: verl's trainer config written from our train config, and verl started on it.

Written next to the run (`<output>/verl/`):
- `vrag_ppo.yaml`: a Hydra config over verl's own `ppo_trainer` defaults (found through verl's installed package),
  setting only what our train config decides: data from the export's `verl/` parquet, the agent loop, the reward,
  the model, the rollout engine, FSDP and GPU sizes; `verl.overrides` go last;
- `agent_loop.yaml`: verl's agent loop list (`rollout.agent.agent_loop_config_path`) naming
  `vrag_data.train.verl_loop.VragAgentLoop` with the recipe (resolved through the registry by Hydra when verl
  builds the loop), the workspace and this train config;
- `train_config.yaml`: our config as run (the agent loop reads its model and RL settings from it).

verl itself is started as `python -m verl.trainer.main_ppo --config-path <dir> --config-name vrag_ppo`: on the
Ray cluster that `RAY_ADDRESS` names (or the one running on this machine), else a local one. No verl import here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vrag_data.config import ConfigError, RoleConfig
from vrag_data.errors import VragError
from vrag_data.train.config import TrainConfig

AGENT_NAME = "vrag_agent"  # the name verl's config and `@register` use for the loop
LOOP_TARGET = "vrag_data.train.verl_loop.VragAgentLoop"
RECIPE_TARGET = "vrag_data.recipe.registry.get_recipe"  # an entry point resolves the recipe, the loop receives it


@dataclass(frozen=True)
class VerlFiles:
    folder: Path
    trainer: Path  # vrag_ppo.yaml (over verl's ppo_trainer defaults)
    agent_loop: Path
    train_config: Path

    def command(self) -> list[str]:
        return [sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", str(self.folder.resolve()),
                "--config-name", self.trainer.stem]


def _export_data(export: str | None) -> dict[str, Any]:
    if not export:
        raise VragError("--engine verl reads its tasks from an RL export: pass --data EXPORT (the folder `vrag-data "
                        "export --format verl` wrote)")
    root = Path(export).resolve()
    cfg_path = root / "verl" / "config.yaml"
    if not cfg_path.is_file():
        raise VragError(f"{root}: no verl/config.yaml; export with `--format verl` and pass that export folder as --data")
    data = dict((yaml.safe_load(cfg_path.read_text()) or {}).get("data") or {})
    for key in ("train_files", "val_files"):
        data[key] = [str(root / f) for f in data.get(key) or []]
    if not data.get("train_files"):
        raise VragError(f"{cfg_path}: data.train_files is empty; the export holds no RL rows")
    reward = root / "reward" / "compute_score.py"
    if not reward.is_file():
        raise VragError(f"{root}: reward/compute_score.py missing; re-run the verl export")
    data["reward_path"] = str(reward)
    return data


def _reward_kwargs(judge: RoleConfig | str | None) -> dict[str, Any]:
    """The judge role of our config as the shipped reward's kwargs (`vrag_data.rewards.judge_client.judge_setting`)."""
    if judge is None:
        raise VragError("rl.judge: name the answer judge: an endpoint (`judge: {endpoints: [{base_url: URL, model: NAME}]}`) "
                        "or `judge: rules` for the rule scorers")
    if judge == "rules":
        return {"judge": "rules"}
    assert isinstance(judge, RoleConfig)
    if not judge.endpoints:
        raise VragError("rl.judge.endpoints: the reward's judge needs one endpoint (base_url, model) under verl")
    ep = judge.endpoints[0]
    return {"judge_url": ep.base_url, "judge_model": ep.model, **({"judge_api_key_env": ep.api_key_env} if ep.api_key_env else {})}


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node = tree
    *head, last = dotted.split(".")
    for k in head:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"verl.overrides.{dotted}: {k} is not a section")
    node[last] = value


def verl_trainer_config(cfg: TrainConfig, files: VerlFiles, export: dict[str, Any]) -> dict[str, Any]:
    rl, v, m = cfg.rl, cfg.verl, cfg.model
    if rl.estimator != "grpo":
        raise VragError(f"rl.estimator {rl.estimator}: verl runs grpo here; rs_grpo and spo run on the bundled trainer "
                        "(--engine bundled)")
    if not m.path:
        raise VragError("model.path: verl loads a local pretrained model folder; set it (`--set model.path=DIR`)")
    batch = rl.tasks_per_step
    data = {k: export[k] for k in ("train_files", "val_files", "prompt_key", "image_key") if k in export}
    data.update(max_prompt_length=v.prompt_length, max_response_length=v.response_length, train_batch_size=batch,
                filter_overlong_prompts=True, return_raw_chat=True, shuffle=True, seed=rl.seed)
    data["val_files"] = list(data.get("val_files") or data["train_files"])  # a copy: no YAML alias in the file
    out = Path(cfg.output_dir).resolve()
    tree: dict[str, Any] = {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "data": data,
        "actor_rollout_ref": {
            "model": {"path": str(Path(m.path).resolve()), "enable_gradient_checkpointing": m.gradient_checkpointing},
            "actor": {
                "strategy": "fsdp",
                "optim": {"lr": rl.learning_rate, "weight_decay": rl.weight_decay, "lr_warmup_steps_ratio": rl.warmup_ratio,
                          "clip_grad": rl.max_grad_norm},
                "ppo_mini_batch_size": batch, "ppo_micro_batch_size_per_gpu": v.micro_batch_size_per_gpu,
                "ppo_epochs": rl.updates_per_step, "clip_ratio_low": rl.clip_low, "clip_ratio_high": rl.clip_high,
                "loss_agg_mode": "token-mean", "use_kl_loss": rl.kl_coef > 0, "kl_loss_coef": rl.kl_coef,
                "kl_loss_type": "low_var_kl",  # k3, the bundled trainer's estimator
                "freeze_vision_tower": m.freeze_vision_tower,
                # FSDP full shard keeps fp32 master weights (model_dtype) and computes in bf16 (verl's mixed precision)
                "fsdp_config": {"param_offload": v.param_offload, "optimizer_offload": v.optimizer_offload,
                                "model_dtype": "fp32"},
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": v.micro_batch_size_per_gpu,
                    "fsdp_config": {"param_offload": v.param_offload}},
            "rollout": {
                "name": v.rollout_engine, "mode": "async", "n": rl.group_size,
                "tensor_model_parallel_size": v.tensor_parallel, "gpu_memory_utilization": v.gpu_memory_utilization,
                "temperature": rl.temperature, "top_p": rl.top_p,
                "log_prob_micro_batch_size_per_gpu": v.micro_batch_size_per_gpu,
                "agent": {"num_workers": v.agent_workers, "default_agent_loop": AGENT_NAME,
                          "agent_loop_config_path": str(files.agent_loop.resolve())},
            },
        },
        "algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": rl.scale_std, "use_kl_in_reward": False},
        "reward": {"custom_reward_function": {"path": export["reward_path"], "name": "compute_score",
                                              "reward_kwargs": _reward_kwargs(rl.judge)}},
        "trainer": {
            "nnodes": v.nnodes, "n_gpus_per_node": v.n_gpus_per_node, "total_training_steps": rl.max_steps,
            "save_freq": rl.save_steps or -1, "test_freq": -1, "val_before_train": False, "logger": ["console"],
            "project_name": "vrag-data", "experiment_name": str(rl.recipe),
            "default_local_dir": str(out / "checkpoints"), "resume_mode": "auto",
        },
    }
    for key, value in v.overrides.items():
        _set(tree, key, value)
    return tree


def write_verl_config(cfg: TrainConfig, export: str | None = None) -> VerlFiles:
    """Write `<output>/verl/{vrag_ppo,agent_loop,train_config}.yaml`; returns their paths."""
    if not cfg.rl.recipe:
        raise VragError("rl.recipe: name the recipe to roll out (e.g. `recipe: vrag_rl` under `rl:` in the train config)")
    if not cfg.workspace:
        raise VragError("the verl agent loop runs the episodes against a workspace (corpus, tasks, index): pass -w WORKSPACE")
    export_data = _export_data(export or cfg.data.path)
    folder = Path(cfg.output_dir) / "verl"
    files = VerlFiles(folder, folder / "vrag_ppo.yaml", folder / "agent_loop.yaml", folder / "train_config.yaml")
    trainer = verl_trainer_config(cfg, files, export_data)
    as_run = cfg.model_copy(update={"workspace": str(Path(cfg.workspace).resolve()),
                                    "output_dir": str(Path(cfg.output_dir).resolve())})
    loop = [{
        "name": AGENT_NAME,
        "_target_": LOOP_TARGET,
        "train_config": str(files.train_config.resolve()),
        "recipe": {"_target_": RECIPE_TARGET, "name": cfg.rl.recipe},
    }]
    folder.mkdir(parents=True, exist_ok=True)
    files.train_config.write_text(yaml.safe_dump(as_run.model_dump(mode="json"), sort_keys=False))
    files.agent_loop.write_text(yaml.safe_dump(loop, sort_keys=False))
    files.trainer.write_text(yaml.safe_dump(trainer, sort_keys=False))
    return files


def launch_verl(files: VerlFiles, ray_address: str | None = None) -> int:
    """Run verl's trainer on the written config (blocks; returns its exit status)."""
    if importlib.util.find_spec("verl") is None:
        raise VragError("verl is not installed in this environment: `pip install verl==0.9.1` and its rollout engine "
                        "(vLLM or SGLang) beside vrag-data, or use --dry-run to write the config only")
    env = dict(os.environ)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return subprocess.run(files.command(), env=env, check=False).returncode
