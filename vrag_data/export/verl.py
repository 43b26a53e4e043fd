"""verl parquet export (RLHFDataset columns + the top-level `file_name` / `reference_page` VRAG-RL reads).

`prompt` is a chat list whose contents carry one `<image>` per entry of `images`; `images` entries are
`{"image": "images/<hash>.jpg"}`, relative to the export folder (verl hands them to qwen-vl-utils' `fetch_image`,
which opens them from the working directory: run the trainer from the export folder, so a copied export loads
anywhere), or `{"bytes": ...}` with `image_mode: bytes`. The
images column is written only when some prompt has images: VRAG-RL-style prompts have none (pages arrive
through search during the rollout).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from vrag_data.export.hf import rl_row
from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written
from vrag_data.export.io import ShardWriter, write_text
from vrag_data.export.reward_bundle import write_reward_bundle
from vrag_data.export.rl import PromptBudget

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

    def __init__(self, out_root: Path, shard_size: int, with_images: bool, image_mode: str = "path") -> None:
        self.out_root, self.shard_size = out_root, shard_size
        self.with_images, self.image_mode = with_images, image_mode
        self.dir = out_root / "verl"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.schema = verl_schema(with_images, image_mode)
        self.writers: dict[str, ShardWriter] = {}
        self.budget = PromptBudget(out_root)

    def _images(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.with_images:
            return [{k: v for k, v in r.items() if k != "images"} for r in rows]
        out = []
        for r in rows:
            r = dict(r)
            if self.image_mode == "path":
                r["images"] = [{"image": str(p)} for p in r["images"]]  # relative to the export folder
            else:
                r["images"] = [{"bytes": (self.out_root / p).read_bytes()} for p in r["images"]]
            out.append(r)
        return out

    def write_rl(self, item: RlItem) -> None:
        rec = item.rec
        split = str(rec.extra_info.get("split") or "train")
        w = self.writers.get(split)
        if w is None:
            w = self.writers[split] = ShardWriter(self.out_root, self.dir, split, "parquet", self.shard_size, self.schema, self._images)
        w.add(rl_row(rec))
        self.budget.add("\n".join(m["content"] for m in rec.prompt), list(rec.images) if self.with_images else [])

    def close(self) -> Written:
        if not self.writers:  # an empty train split: counted, no shard written
            self.writers["train"] = ShardWriter(self.out_root, self.dir, "train", "parquet", self.shard_size, self.schema, self._images)
        counts = {}
        for split, w in sorted(self.writers.items()):
            w.close()  # no zero-row shards: `datasets` cannot read them
            counts[split] = w.rows
        self._write_config(counts)
        write_reward_bundle(self.out_root)
        return Written(counts)

    def _write_config(self, counts: dict[str, int]) -> None:
        """`verl/config.yaml`: the `data` and `custom_reward_function` keys this export needs, relative to the export
        folder (start verl there, or make the paths absolute). Merge it into the trainer's config or pass the keys
        as overrides (`data.max_prompt_length=...`)."""
        files = {split: [f"verl/{p.name}" for p in w.paths] for split, w in sorted(self.writers.items())}
        train = files.get("train", [])
        val = next((v for k, v in files.items() if k != "train" and v), train)
        cfg = {
            "data": {
                "train_files": train,
                "val_files": list(val),
                "prompt_key": "prompt",
                **({"image_key": "images"} if self.with_images else {}),
                "max_prompt_length": self.budget.length(),
                "filter_overlong_prompts": True,
            },
            "custom_reward_function": {"path": "reward/compute_score.py", "name": "compute_score"},
        }
        write_text(self.out_root, self.dir / "config.yaml", yaml.safe_dump(cfg, sort_keys=False))


class VerlFormat(FormatDefaults):
    """verl parquet (RLHFDataset columns), `verl/config.yaml` and the reward bundle in `reward/`."""

    name, label, entry, sft, rl = "verl", "verl parquet", "verl", False, True

    def open(self, ctx: FormatContext) -> VerlWriter:
        return VerlWriter(ctx.out, ctx.shard_size, with_images=ctx.rl_with_images, image_mode=ctx.cfg.image_mode)

    def card_section(self, written: Written) -> str:
        return ("- verl (`verl/`): merge `verl/config.yaml` (data files, prompt length, `custom_reward_function` = "
                "`reward/compute_score.py`) into the trainer's config and start it from the export folder\n")


FORMAT = VerlFormat()
