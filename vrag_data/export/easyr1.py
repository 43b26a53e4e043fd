"""EasyR1 jsonl export: `prompt` (one `<image>` per image), `answer`, `image` (paths relative to the export root,
which `easyr1/data_config.yaml` passes as `image_dir`).

`answer` is EVisRAG's tagged target (`<evidence>[i]: ...` lines, images 1-indexed, and `<answer>`) for recipes
whose RL prompt is the one-turn evidence form; for the others it is JSON naming the recipe's reward and what that
reward reads (`vrag_data.rewards.easyr1` dispatches on it)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from vrag_data.export.conversation import with_placeholders
from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written, register_format
from vrag_data.export.images import BadImage, ImageStore, MissingImage
from vrag_data.export.io import ShardWriter, write_text
from vrag_data.export.reward_bundle import RewardBundle
from vrag_data.export.hf import extra_info_row
from vrag_data.export.rl import PromptBudget, evidence_ground_truth
from vrag_data.schema.records import ImageRef, RlRecord


def json_ground_truth(rec: RlRecord) -> str:
    """EasyR1 hands a reward function only the response and this string: for recipes other than the one-turn
    evidence form it carries the reward to score with and the fields that reward reads (verl's `extra_info`)."""
    return json.dumps({"data_source": rec.data_source, "ground_truth": rec.reward_model.ground_truth,
                       "extra_info": extra_info_row(rec.extra_info)}, ensure_ascii=False, sort_keys=True)


class EasyR1Writer:
    name = "easyr1"

    def __init__(self, out_root: Path, shard_size: int, store: ImageStore | None = None,
                 skip: Callable[[str, str, str, str], None] | None = None) -> None:
        self.out_root, self.shard_size = out_root, shard_size
        self.store, self.skip = store, skip
        self.dir = out_root / "easyr1"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.writers: dict[str, ShardWriter] = {}
        self.budget = PromptBudget(out_root)
        self.rewards = RewardBundle()  # the reward modules the rows name travel in reward/

    def write_rl(self, item: RlItem) -> None:
        """One row: the prompt as one text with an `<image>` per image, the evidence ground truth, the images
        (a prompt without images gets the gold pages, over which the evidence form answers)."""
        task, rec = item.task, item.rec
        self.rewards.add(rec.extra_info.get("reward"), rec.id)  # a reward the bundle cannot carry stops the export
        refs = item.refs or [ImageRef(page_id=p) for p in task.evidence_pages]
        try:
            # the prompt's own images are the row's (materialised once, as the SFT records show them)
            images = list(rec.images) if item.refs else [self.store.materialise(ref, item.max_pixels) for ref in refs]
        except (MissingImage, BadImage) as err:
            if self.skip is not None:
                self.skip("easyr1", rec.id, "missing_image" if isinstance(err, MissingImage) else "bad_image", f"task {task.task_id}: {err}")
            return
        system = "\n".join(m["content"] for m in item.prompt if m["role"] == "system")
        user = "\n".join(m["content"] for m in item.prompt if m["role"] != "system")
        if not item.refs:
            user = with_placeholders(user, len(images))
        text = (system + "\n\n" + user) if system else user
        self.budget.add(text, images)
        sufficient = _sufficient(item, [r.page_id for r in refs])
        self.add_row(task.split or "train", {
            "id": rec.id,
            "prompt": (system + "\n\n" + user) if system else user,
            "answer": (evidence_ground_truth(task, [r.page_id for r in refs], item.evidence) if item.evidence_rows
                       else json_ground_truth(rec)),
            "image": images,
            "data_source": rec.data_source,
            "task_id": task.task_id,
            "recipe": item.recipe,
            # read by vrag_data.rewards.easyr1 when the trainer passes row fields through
            "shown_pages": [r.page_id for r in refs],
            "gold_pages": list(task.evidence_pages),
            "answer_format": task.answer_format or "",
            **({"sufficient": sufficient} if sufficient is not None else {}),
        })

    def add_row(self, split: str, row: dict) -> None:
        w = self.writers.get(split)
        if w is None:
            w = self.writers[split] = ShardWriter(self.out_root, self.dir / split, "part", "jsonl", self.shard_size)
        w.add(row)

    def close(self) -> Written:
        if not self.writers:  # an empty train split: counted, no shard written
            self.writers["train"] = ShardWriter(self.out_root, self.dir / "train", "part", "jsonl", self.shard_size)
        counts = {}
        for split, w in sorted(self.writers.items()):
            w.close()  # no zero-row shards: `datasets` cannot read them
            counts[split] = w.rows
        config = self.dir / "data_config.yaml"
        config.unlink(missing_ok=True)
        if not counts.get("train"):  # a config naming a missing folder makes EasyR1 fetch that name from the Hub
            self.rewards.write(self.out_root)
            return Written(counts, warnings=[
                f"easyr1: no training rows ({', '.join(f'{k}={v}' for k, v in counts.items())}); "
                "easyr1/data_config.yaml is not written"])
        # paths relative to the export folder: run EasyR1 from there (the folder can be copied anywhere)
        data: dict = {"train_files": "easyr1/train", "val_files": "easyr1/train"}  # EasyR1 needs a validation set
        for split in sorted(self.writers):
            if split != "train" and counts[split]:  # a folder with rows: never a name EasyR1 would look up online
                data["val_files"] = f"easyr1/{split}"
        # EasyR1's defaults would drop every row (max_prompt_length 512) and re-size the images (max_pixels 4M);
        # the reward is the one shipped in reward/. Use as `config=easyr1/data_config.yaml` from the export folder.
        cfg: dict = {
            "data": {
                **data,
                "prompt_key": "prompt",
                "answer_key": "answer",
                "image_key": "image",
                "image_dir": ".",
                "max_prompt_length": self.budget.length(),
                # images are written at the model's processor size: EasyR1 must not re-size them either way
                **({"max_pixels": self.budget.max_pixels, "min_pixels": None} if self.budget.max_pixels else {}),
            },
            "worker": {"reward": {"reward_function": "reward/easyr1_reward.py:compute_score"}},
        }
        write_text(self.out_root, config, easyr1_config_head(counts["train"]) + yaml.safe_dump(cfg, sort_keys=False))
        self.rewards.write(self.out_root)
        return Written(counts)


EASYR1_USER_KEYS = ("worker.actor.model.model_path", "trainer.n_gpus_per_node", "trainer.nnodes",
                    "data.rollout_batch_size", "worker.actor.global_batch_size", "worker.actor.fsdp")


def easyr1_config_head(n_train: int) -> str:
    return f"""# EasyR1 config of this export (data files, prompt length, image sizes, reward). From the export folder (every
# path below is relative to it), one config= and the rest as overrides (EasyR1 keeps only the last config=):
#   python3 -m verl.trainer.main config=easyr1/data_config.yaml worker.actor.model.model_path=<model> \\
#       trainer.n_gpus_per_node=<GPUs per node> trainer.nnodes=<nodes> data.rollout_batch_size=<at most {n_train}> \\
#       worker.actor.global_batch_size=<at most data.rollout_batch_size>
# Set before training (this file cannot know them):
#   worker.actor.model.model_path: the policy to train (EasyR1 has no default)
#   trainer.n_gpus_per_node, trainer.nnodes: your GPUs (EasyR1's defaults: 8 per node, 1 node)
#   data.rollout_batch_size, worker.actor.global_batch_size: this export has {n_train} training rows (EasyR1's
#     defaults, 512 and 256, leave no full batch of a small export)
#   worker.actor.fsdp: EasyR1 shards with FSDP (no DeepSpeed file); its offload and sharding keys live there
"""


class EasyR1Format(FormatDefaults):
    """EasyR1 jsonl per split, `easyr1/data_config.yaml` and the reward bundle in `reward/`."""

    name, label, entry, sft, rl = "easyr1", "EasyR1 jsonl", "easyr1", False, True

    def open(self, ctx: FormatContext) -> EasyR1Writer:
        return EasyR1Writer(ctx.out, ctx.shard_size, ctx.store, ctx.skip)

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]:
        odd = [r for r in recipes if not ctx.hints(r).get("evidence_rows")]
        if not odd:
            return []
        return [f"easyr1 rows of {odd}: EasyR1 has no agent loop (one response per prompt); their ground truth is "
                "JSON naming the recipe's own reward and what it reads"]

    def card_section(self, written: Written) -> str:
        return ("- EasyR1 (`easyr1/`): `config=easyr1/data_config.yaml` from the export folder (reward "
                "`reward/easyr1_reward.py:compute_score`)\n")


FORMAT = register_format(EasyR1Format())


def _sufficient(item: RlItem, shown: list[str]) -> bool | None:
    """The row's sufficiency label: for an evidence row always the one its target was written with (every gold page
    among the images shown), else the run's label when it recorded one."""
    if item.evidence_rows:
        gold = set(item.task.evidence_pages)
        return bool(gold) and gold <= set(shown)
    label = item.rec.extra_info.get("sufficient", item.sufficient)
    return None if label is None else bool(label)
