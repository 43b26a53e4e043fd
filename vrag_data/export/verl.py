"""verl parquet export (RLHFDataset columns + the top-level `file_name` / `reference_page` VRAG-RL reads).

`prompt` is a chat list whose contents carry one `<image>` per entry of `images`; `images` entries are
`{"image": "images/<hash>.jpg"}`, relative to the export folder (verl hands them to qwen-vl-utils' `fetch_image`,
which opens them from the working directory: run the trainer from the export folder, so a copied export loads
anywhere), or `{"bytes": ...}` with `image_mode: bytes` (each distinct image once per shard; the export then keeps
no `images/` unless another format names its files). The
images column is written only when some prompt has images: VRAG-RL-style prompts have none (pages arrive
through search during the rollout).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from vrag_data.env.geometry import FACTOR
from vrag_data.export.hf import SHARD_BYTES, rl_row
from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written, register_format
from vrag_data.export.io import ShardWriter, write_text
from vrag_data.export.reward_bundle import RewardBundle
from vrag_data.export.rl import PromptBudget
from vrag_data.rewards.format import last_tag

_MSG = pa.struct([("role", pa.string()), ("content", pa.string())])
_EXTRA = pa.struct(
    [
        ("question", pa.string()),
        ("answer", pa.string()),
        ("answer_format", pa.string()),
        ("gold_pages", pa.list_(pa.string())),
        ("gold_boxes", pa.string()),
        ("recipe", pa.string()),
        ("reward", pa.string()),
        ("coord_space", pa.string()),
        ("max_pixels", pa.int64()),
        ("page_sizes", pa.string()),
        ("task_id", pa.string()),
        ("index", pa.int64()),
        ("split", pa.string()),
        ("shown_pages", pa.list_(pa.string())),
        ("sufficient", pa.bool_()),  # EVisRAG's label (null when the recipe has none): its rewards read it
        # the rollout keys (`vrag_data.export.rl.ROLLOUT_KEYS`), empty: the agent loop's extra_fields fill them
        ("search_results", pa.list_(pa.list_(pa.string()))),
        ("selections", pa.list_(pa.struct([("candidates", pa.list_(pa.string())), ("selected", pa.list_(pa.string()))]))),
        ("read_pages", pa.list_(pa.string())),
    ]
)


def verl_schema(with_images: bool, image_mode: str) -> pa.Schema:
    fields = [
        ("id", pa.string()),
        ("data_source", pa.string()),
        ("prompt", pa.list_(_MSG)),
    ]
    if with_images:
        item = pa.struct([("image", pa.string())]) if image_mode == "path" else pa.struct([("bytes", pa.binary())])
        fields.append(("images", pa.list_(item)))
    fields += [
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", _EXTRA),
        ("file_name", pa.string()),
        ("reference_page", pa.list_(pa.int64())),
    ]
    return pa.schema(fields)


class VerlWriter:
    name = "verl"

    def __init__(self, out_root: Path, shard_size: int, with_images: bool, image_mode: str = "path",
                 family: str = "qwen2.5-vl", fork: bool = False) -> None:
        self.out_root, self.shard_size, self.fork = out_root, shard_size, fork
        self.with_images, self.image_mode, self.family = with_images, image_mode, family
        self.dir = out_root / "verl"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.schema = verl_schema(with_images, image_mode)
        self.writers: dict[str, ShardWriter] = {}
        self.budget = PromptBudget(out_root)
        self.rewards = RewardBundle()  # the reward modules the rows name travel in reward/
        self.seen: set[str] = set()  # images of the shard being filled (bytes mode: a shard is cut by their bytes)

    def _writer(self, split: str) -> ShardWriter:
        """The split's shard writer; in bytes mode each distinct image is stored once per shard (the bytes column
        is dictionary-encoded) and a shard is cut by the bytes of its distinct images."""
        w = self.writers.get(split)
        if w is None:
            embed = self.with_images and self.image_mode == "bytes"
            w = self.writers[split] = ShardWriter(
                self.out_root, self.dir, split, "parquet", self.shard_size, self.schema, self._images,
                **({"weigh": self._weigh, "max_bytes": SHARD_BYTES, "dictionary": ["images.list.element.bytes"]}
                   if embed else {}))
        return w

    def _weigh(self, row: dict[str, Any]) -> int:
        new = [p for p in row["images"] if p not in self.seen]
        self.seen.update(new)
        return sum((self.out_root / p).stat().st_size for p in new) + 1024

    def _images(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.with_images:
            return [{k: v for k, v in r.items() if k != "images"} for r in rows]
        out = []
        self.seen = set()  # the next shard has its own dictionary
        cache: dict[str, bytes] = {}
        for r in rows:
            r = dict(r)
            if self.image_mode == "path":
                r["images"] = [{"image": str(p)} for p in r["images"]]  # relative to the export folder
            else:
                r["images"] = [{"bytes": cache.get(p) or cache.setdefault(p, (self.out_root / p).read_bytes())}
                               for p in r["images"]]
            out.append(r)
        return out

    def write_rl(self, item: RlItem) -> None:
        rec = item.rec
        self.rewards.add(rec.extra_info.get("reward"), rec.id)  # a reward the bundle cannot carry stops the export
        split = str(rec.extra_info.get("split") or "train")
        row = rl_row(rec)
        plain = last_tag(rec.reward_model.ground_truth, "answer") if self.fork and item.evidence_rows else None
        if plain is not None:  # the fork's judge compares the answer with `ground_truth`: the plain answer, not the tagged target
            row["reward_model"] = {**row["reward_model"], "ground_truth": plain}
            row["extra_info"] = {**row["extra_info"], "answer": plain}
        self._writer(split).add(row)
        self.budget.add("\n".join(m["content"] for m in rec.prompt), list(rec.images) if self.with_images else [])

    def close(self) -> Written:
        if not self.writers:  # an empty train split: counted, no shard written
            self._writer("train")
        counts = {}
        for split, w in sorted(self.writers.items()):
            w.close()  # no zero-row shards: `datasets` cannot read them
            counts[split] = w.rows
        warnings = self._write_config(counts)
        self.rewards.write(self.out_root)
        # embedded bytes (the fork's rows) name no file: the export then keeps no images/ on verl's account
        return Written(counts, warnings=warnings, names_image_files=self.with_images and self.image_mode == "path")

    def _write_config(self, counts: dict[str, int]) -> list[str]:
        """`verl/config.yaml` (verl >= 0.9) and `verl/vragrl.yaml` (VRAG-RL's verl fork): Hydra configs that extend the
        trainer's own `ppo_trainer` with this export's data files, prompt length and reward, relative to the export
        folder (start the trainer there). Without training rows neither is written (a config naming no file, or a
        missing one, would send the trainer elsewhere for data): the export says so instead."""
        files = {split: [f"verl/{p.name}" for p in w.paths] for split, w in sorted(self.writers.items())}
        train = files.get("train", [])
        for name in ("config.yaml", "vragrl.yaml"):
            (self.dir / name).unlink(missing_ok=True)
        if not train:
            return [f"verl: no training rows ({', '.join(f'{k}={v}' for k, v in counts.items())}); verl/config.yaml "
                    "and verl/vragrl.yaml are not written"]
        val = next((v for k, v in files.items() if k != "train" and v), train)
        data = {
            "train_files": train,
            "val_files": list(val),
            "prompt_key": "prompt",
            **({"image_key": "images"} if self.with_images else {}),
            "max_prompt_length": self.budget.length(),
            "filter_overlong_prompts": True,
        }
        n_train = counts.get("train", 0)
        # verl >= 0.9 counts image tokens by the model's patch (Qwen2.5-VL 14 px, Qwen3-VL 16 px); the fork knows no such key
        patch = {"image_patch_size": FACTOR[self.family] // 2} if self.with_images else {}
        write_text(self.out_root, self.dir / "config.yaml", verl_config_text({**data, **patch}, n_train))
        fork_images = self.with_images and self.image_mode == "path"
        write_text(self.out_root, self.dir / "vragrl.yaml", vragrl_config_text(data, n_train, fork_images))
        return []


MODEL_KEY = "actor_rollout_ref.model.path"
# keys a user must set for a run (the export cannot know them); named in each config's header, checked by a test
VERL_USER_KEYS = (MODEL_KEY, "trainer.n_gpus_per_node", "trainer.nnodes", "actor_rollout_ref.rollout.name",
                  "data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                  "actor_rollout_ref.actor.strategy")
VRAGRL_USER_KEYS = (MODEL_KEY, "trainer.n_gpus_per_node", "trainer.nnodes", "data.train_batch_size",
                    "actor_rollout_ref.actor.ppo_mini_batch_size", "reward_model.rm_url", "reward_model.rm_key",
                    "reward_model.rm_model_name", "actor_rollout_ref.actor.strategy")


def verl_config_text(data: dict[str, Any], n_train: int) -> str:
    head = f"""# verl (>= 0.9) config of this export: verl's own ppo_trainer plus this export's data and reward. From the export
# folder (every path below is relative to it):
#   python3 -m verl.trainer.main_ppo --config-dir=verl --config-name=config \\
#       {MODEL_KEY}=<model folder or Hub name> trainer.n_gpus_per_node=<GPUs per node> trainer.nnodes=<nodes> \\
#       actor_rollout_ref.rollout.name=<vllm | sglang> data.train_batch_size=<at most {n_train}> \\
#       actor_rollout_ref.actor.ppo_mini_batch_size=<at most data.train_batch_size>
# Set before training (this file cannot know them):
#   {MODEL_KEY}: the policy to train (verl's default names a model you will not have)
#   trainer.n_gpus_per_node, trainer.nnodes: your GPUs (verl's defaults: 8 per node, 1 node)
#   actor_rollout_ref.rollout.name: the rollout engine installed beside verl
#   data.train_batch_size, actor_rollout_ref.actor.ppo_mini_batch_size: this export has {n_train} training rows
#     (verl's defaults, 1024 and 256, leave no full batch of a small export)
#   actor_rollout_ref.actor.strategy: fsdp by default, which needs no file (DeepSpeed is not a verl strategy);
#     FSDP sharding and offload are keys under actor_rollout_ref.actor.fsdp_config
# The multi-turn recipes search during the rollout: their tools need an agent loop (README.md, search/).
defaults:
  - ppo_trainer
  - _self_
"""
    body = {"data": data,
            "reward": {"custom_reward_function": {"path": "reward/compute_score.py", "name": "compute_score"}}}
    return head + yaml.safe_dump(body, sort_keys=False)


def vragrl_config_text(data: dict[str, Any], n_train: int, path_images: bool) -> str:
    images = ("# These rows name their images by path; the fork reads embedded bytes only: export with --for vragrl.\n"
              if path_images else "")
    head = f"""# VRAG-RL's verl fork (0.2.0.dev) config of this export: the fork's ppo_trainer plus this export's data and
# reward. From the export folder, with the fork installed (every path below is relative to the export folder):
#   python3 -m verl.trainer.main_ppo --config-dir=verl --config-name=vragrl \\
#       {MODEL_KEY}=<model> trainer.n_gpus_per_node=<GPUs per node> trainer.nnodes=<nodes> \\
#       data.train_batch_size=<at most {n_train}> actor_rollout_ref.actor.ppo_mini_batch_size=<...> \\
#       reward_model.rm_url=<judge URL> reward_model.rm_key=<key> reward_model.rm_model_name=<judge model>
# Set before training (this file cannot know them):
#   {MODEL_KEY}: the policy to train (the fork's default names a model you will not have)
#   trainer.n_gpus_per_node, trainer.nnodes: your GPUs
#   data.train_batch_size, actor_rollout_ref.actor.ppo_mini_batch_size: this export has {n_train} training rows
#   reward_model.rm_url, reward_model.rm_key, reward_model.rm_model_name: the fork's answer judge (its reward
#     manager `rm` adds 0.7 x judge + 0.2 x NDCG to reward/vragrl_reward.py's float)
#   actor_rollout_ref.actor.strategy: fsdp by default (no file needed)
#   the search server the fork's rollout calls (its search_url; README.md, search/)
{images}defaults:
  - ppo_trainer
  - _self_
"""
    body = {"data": data,
            "custom_reward_function": {"path": "reward/vragrl_reward.py", "name": "compute_score"},
            "reward_model": {"reward_manager": "rm"}}
    return head + yaml.safe_dump(body, sort_keys=False)


class VerlFormat(FormatDefaults):
    """verl parquet (RLHFDataset columns), `verl/config.yaml` and the reward bundle in `reward/`."""

    name, label, entry, sft, rl = "verl", "verl parquet", "verl", False, True

    def open(self, ctx: FormatContext) -> VerlWriter:
        return VerlWriter(ctx.out, ctx.shard_size, with_images=ctx.rl_with_images, image_mode=ctx.cfg.image_mode,
                          family=ctx.family, fork=ctx.target == "vragrl")

    def card_section(self, written: Written) -> str:
        return ("- verl (`verl/`): from the export folder, `python3 -m verl.trainer.main_ppo --config-dir=verl "
                "--config-name=config` plus the keys its header names (model, GPUs, batch sizes); VRAG-RL's fork: "
                "`--config-name=vragrl`; rewards in `reward/` (standard library only)\n")


FORMAT = register_format(VerlFormat())
