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
from vrag_data.export.formats import FormatContext, FormatDefaults, Written
from vrag_data.export.io import ShardWriter, write_json, write_text
from vrag_data.schema.records import SftRecord

# SFT hyper-parameters come from the recipe's export hints (the paper's figures; per_device x grad_accum x 8 GPUs
# gives its global batch). A recipe whose paper gives none gets these generic values, and the yaml says so.
GENERIC_SFT = {"cutoff_len": 16384, "learning_rate": 1.0e-5, "num_train_epochs": 3.0, "gradient_accumulation_steps": 2}
FAMILY_MODEL = {
    "qwen2.5-vl": ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_vl"),
    "qwen3-vl": ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
}


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
        "deepspeed": "examples/deepspeed/ds_z3_config.json",
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
            sft = hints.get("sft") or {}
            head = (f"# {recipe}: SFT settings from {sft.get('source') or 'the recipe'}\n" if sft else
                    f"# {recipe}: the recipe names no SFT hyper-parameters; generic values below, tune them\n")
            write_text(self.out_root, self.dir / f"sft_{recipe}_{self.family.replace('.', '_').replace('-', '')}.yaml",
                       head + yaml.safe_dump(cfg, sort_keys=False))
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(self.out_root, self.dir / "dataset_info.json", info)
        return Written(counts)


class LlamaFactoryFormat(FormatDefaults):
    """LLaMA-Factory sharegpt shards per recipe, `dataset_info.json` and one SFT yaml per recipe."""

    name, label, entry, sft, rl = "llamafactory", "LLaMA-Factory", "llamafactory", True, False

    def open(self, ctx: FormatContext) -> LlamaFactoryWriter:
        return LlamaFactoryWriter(ctx.out, ctx.shard_size, ctx.family, ctx.hints)

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]:
        return [f"{r}: the recipe names no SFT hyper-parameters; the LLaMA-Factory yaml uses generic values"
                for r in recipes if ctx.hints(r).get("sft") is None]

    def card_section(self, written: Written) -> str:
        return ("- LLaMA-Factory (`llamafactory/`): from the export folder, `llamafactory-cli train "
                "llamafactory/sft_<recipe>_<family>.yaml` (dataset_dir and media_dir are relative to it)\n")


FORMAT = LlamaFactoryFormat()
