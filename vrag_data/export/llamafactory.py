"""LLaMA-Factory export: sharegpt JSON shards per recipe, `dataset_info.json` and a ready SFT yaml.

Format: LLaMA-Factory's "sharegpt" formatting with `tags` for OpenAI-style `messages` (role/content), the
system prompt in its own `system` column and an `images` column. Image paths are relative to the export
root, which the yaml passes as `media_dir`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from vrag_data.env.geometry import DEFAULT_MAX_PIXELS
from vrag_data.export.formats import FormatContext, FormatDefaults, Written, register_format
from vrag_data.export.io import ShardWriter, write_json, write_text
from vrag_data.schema.records import SftRecord

# SFT hyper-parameters come from the recipe's export hints (the paper's figures; per_device x grad_accum x 8 GPUs
# gives its global batch). A recipe whose paper gives none gets these generic values, and the yaml says so.
GENERIC_SFT = {"cutoff_len": 16384, "learning_rate": 1.0e-5, "num_train_epochs": 3.0, "gradient_accumulation_steps": 2}
FAMILY_MODEL = {
    "qwen2.5-vl": ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_vl"),
    "qwen3-vl": ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
}


DS_CONFIG = "ds_z3_config.json"
# DeepSpeed ZeRO-3 with every size left to the Hugging Face trainer ("auto"), as LLaMA-Factory's own example
DS_Z3 = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_allow_untested_optimizer": True,
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16, "hysteresis": 2,
             "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {
        "stage": 3, "overlap_comm": False, "contiguous_gradients": True, "sub_group_size": 1e9,
        "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": True,
    },
}
# keys a user must set for a run (the export cannot know them); named in each yaml's header, checked by a test
LF_USER_KEYS = ("model_name_or_path", "deepspeed", "NPROC_PER_NODE", "bf16", "output_dir")


def yaml_head(recipe: str, yaml_name: str, family: str, hints: Mapping[str, Any]) -> str:
    sft = hints.get("sft") or {}
    source = (f"# {recipe}: SFT settings from {sft.get('source') or 'the recipe'}\n" if sft else
              f"# {recipe}: the recipe names no SFT hyper-parameters; generic values below, tune them\n")
    model = FAMILY_MODEL[family][0]
    return source + f"""# From the export folder (every path below is relative to it):
#   FORCE_TORCHRUN=1 NPROC_PER_NODE=<GPUs> llamafactory-cli train llamafactory/{yaml_name}
# Set before training (this file cannot know them):
#   model_name_or_path: {model} is a Hub name (downloaded on first use); give a local folder offline
#   deepspeed: llamafactory/{DS_CONFIG} (ZeRO-3, shipped here) needs the deepspeed package and GPUs;
#     delete the key to train without DeepSpeed (one GPU), or name another DeepSpeed file
#   NPROC_PER_NODE (environment): GPUs per node; the global batch is per_device_train_batch_size x
#     gradient_accumulation_steps x GPUs (the paper's figures assume 8)
#   bf16: needs a GPU with bfloat16 (Ampere or newer); set fp16: true and bf16: false otherwise
#   output_dir: where checkpoints go
"""


def dataset_name(recipe: str) -> str:
    return f"vragdata_{recipe}"


def sft_yaml(recipe: str, family: str, dataset_dir: Path, media_dir: Path, hints: Mapping[str, Any] | None = None) -> dict:
    """The LLaMA-Factory SFT config; `hints` are the recipe's export hints (`max_pixels`, `sft`)."""
    hints = hints or {}
    hp = hints.get("sft") or GENERIC_SFT
    model, template = FAMILY_MODEL[family]
    return {
        "model_name_or_path": model,
        "image_max_pixels": int(hints.get("max_pixels") or DEFAULT_MAX_PIXELS),
        "trust_remote_code": True,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "full",
        "freeze_vision_tower": True,
        "freeze_multi_modal_projector": True,
        "freeze_language_model": False,
        # every assistant turn of a trajectory is a target; mask_history would train only the last one
        "mask_history": False,
        "deepspeed": str(dataset_dir / DS_CONFIG),  # shipped beside the yaml: resolves from the export folder
        "dataset_dir": str(dataset_dir),
        "media_dir": str(media_dir),
        "dataset": dataset_name(recipe),
        "template": template,
        "cutoff_len": hp["cutoff_len"],
        "overwrite_cache": True,
        "preprocessing_num_workers": 16,
        "output_dir": f"saves/{family}/full/sft-{recipe}",
        "logging_steps": 10,
        "save_steps": 500,
        "plot_loss": True,
        "overwrite_output_dir": True,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": hp["gradient_accumulation_steps"],
        "learning_rate": hp["learning_rate"],
        "num_train_epochs": hp["num_train_epochs"],
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.1,
        "bf16": True,
        "ddp_timeout": 180000000,
    }


class LlamaFactoryWriter:
    name = "llamafactory"

    def __init__(self, out_root: Path, shard_size: int, family: str, hints: Callable[[str], Mapping[str, Any]] | None = None) -> None:
        self.out_root, self.shard_size, self.family = out_root, shard_size, family
        self.hints = hints
        self.dir = out_root / "llamafactory"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.writers: dict[str, ShardWriter] = {}

    def write_sft(self, rec: SftRecord, system: str) -> None:
        if rec.metadata.get("split", "train") != "train":
            return  # a test task never reaches a training file (the HF `sft` config holds it under its own split)
        w = self.writers.get(rec.recipe)
        if w is None:
            w = self.writers[rec.recipe] = ShardWriter(self.out_root, self.dir / rec.recipe, "part", "json", self.shard_size)
        w.add({"id": rec.id, "system": system, "messages": [m.model_dump() for m in rec.messages if m.role != "system"], "images": list(rec.images)})

    def close(self) -> Written:
        info = {}
        counts = {}
        for recipe, w in sorted(self.writers.items()):
            w.close()
            counts[recipe] = w.rows
            info[dataset_name(recipe)] = {
                "file_name": recipe,  # a folder of JSON shards
                "formatting": "sharegpt",
                "columns": {"messages": "messages", "system": "system", "images": "images"},
                "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
            }
            hints = self.hints(recipe) if self.hints is not None else {}
            # relative to the export folder: run `llamafactory-cli train llamafactory/<this yaml>` from there
            cfg = sft_yaml(recipe, self.family, Path("llamafactory"), Path("."), hints)
            name = f"sft_{recipe}_{self.family.replace('.', '_').replace('-', '')}.yaml"
            write_text(self.out_root, self.dir / name, yaml_head(recipe, name, self.family, hints) + yaml.safe_dump(cfg, sort_keys=False))
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(self.out_root, self.dir / "dataset_info.json", info)
        if not counts:  # no yaml either: nothing would point at a missing dataset
            return Written(counts, warnings=["llamafactory: no training records; no SFT yaml is written"])
        write_json(self.out_root, self.dir / DS_CONFIG, DS_Z3)
        return Written(counts)


class LlamaFactoryFormat(FormatDefaults):
    """LLaMA-Factory sharegpt shards per recipe, `dataset_info.json` and one SFT yaml per recipe."""

    name, label, entry, sft, rl = "llamafactory", "LLaMA-Factory", "llamafactory", True, False
    sft_splits = ("train",)  # a test task's record is never a training sample (the HF config keeps it apart)

    def open(self, ctx: FormatContext) -> LlamaFactoryWriter:
        return LlamaFactoryWriter(ctx.out, ctx.shard_size, ctx.family, ctx.hints)

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]:
        return [f"{r}: the recipe names no SFT hyper-parameters; the LLaMA-Factory yaml uses generic values"
                for r in recipes if ctx.hints(r).get("sft") is None]

    def card_section(self, written: Written) -> str:
        return ("- LLaMA-Factory (`llamafactory/`): from the export folder, `llamafactory-cli train "
                "llamafactory/sft_<recipe>_<family>.yaml` (dataset_dir and media_dir are relative to it)\n")


FORMAT = register_format(LlamaFactoryFormat())
