"""HF `datasets` export: parquet shards with `Image` features (`sft` and `rl` splits), a `DatasetDict` saved
with `save_to_disk`, the dataset card, and `push_to_hub` when a token and a repo are configured."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import datasets

from vrag_data.export.formats import RlItem
from vrag_data.export.io import ShardWriter
from vrag_data.schema.records import RlRecord, SftRecord

_MSG = {"role": datasets.Value("string"), "content": datasets.Value("string")}

SFT_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "recipe": datasets.Value("string"),
        "task_id": datasets.Value("string"),
        "traj_id": datasets.Value("string"),
        "system": datasets.Value("string"),
        "messages": datasets.List(_MSG),
        "images": datasets.List(datasets.Image()),
        "augmentation": datasets.Value("string"),
        "metadata": datasets.Value("string"),  # JSON: keys vary per recipe
    }
)

RL_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "data_source": datasets.Value("string"),
        "prompt": datasets.List(_MSG),
        "images": datasets.List(datasets.Image()),
        "ability": datasets.Value("string"),
        "reward_model": {"style": datasets.Value("string"), "ground_truth": datasets.Value("string")},
        "extra_info": {
            "question": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "answer_format": datasets.Value("string"),
            "gold_pages": datasets.List(datasets.Value("string")),
            "gold_boxes": datasets.Value("string"),  # JSON {page_id: [[x1,y1,x2,y2] 0-1000]}: keys vary per row
            "recipe": datasets.Value("string"),
            "reward": datasets.Value("string"),
            "coord_space": datasets.Value("string"),
            "max_pixels": datasets.Value("int64"),
            "page_sizes": datasets.Value("string"),  # JSON {page_id: [width, height]} of the gold pages
            "task_id": datasets.Value("string"),
            "index": datasets.Value("int64"),
            "split": datasets.Value("string"),
            "shown_pages": datasets.List(datasets.Value("string")),
        },
        "file_name": datasets.Value("string"),
        "reference_page": datasets.List(datasets.Value("int64")),
    }
)


def extra_info_row(extra: dict[str, Any]) -> dict[str, Any]:
    """`extra_info` with `gold_boxes` as JSON: an Arrow map is not loadable by `datasets`, and a struct keyed
    by page ids would grow one column per page of the corpus."""
    out = dict(extra)
    out["gold_boxes"] = json.dumps(extra.get("gold_boxes") or {}, sort_keys=True)
    out["page_sizes"] = json.dumps(extra.get("page_sizes") or {}, sort_keys=True)
    return out


def rl_row(rec: RlRecord) -> dict[str, Any]:
    """One RL record as a row of the HF `rl` split and of verl's parquet (the same columns)."""
    return {
        "id": rec.id,
        "data_source": rec.data_source,
        "prompt": rec.prompt,
        "images": list(rec.images),
        "ability": rec.ability,
        "reward_model": rec.reward_model.model_dump(),
        "extra_info": extra_info_row(rec.extra_info),
        "file_name": rec.file_name,
        "reference_page": rec.reference_page,
    }


SHARD_BYTES = 128 << 20  # image bytes per parquet shard


class HfWriter:
    name = "hf"

    def __init__(self, out_root: Path, shard_size: int) -> None:
        self.out_root = out_root
        self.dir = out_root / "hf"
        shutil.rmtree(self.dir, ignore_errors=True)  # a previous export's shards must not mix with this one
        kw = {"prepare": self._with_image_bytes, "weigh": self._weight, "max_bytes": SHARD_BYTES}
        self.sft = ShardWriter(out_root, self.dir / "data", "sft", "parquet", shard_size, SFT_FEATURES.arrow_schema, **kw)
        self.rl = ShardWriter(out_root, self.dir / "data", "rl", "parquet", shard_size, RL_FEATURES.arrow_schema, **kw)

    def _weight(self, row: dict[str, Any]) -> int:
        return sum((self.out_root / p).stat().st_size for p in row["images"]) + 1024

    def _with_image_bytes(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Bytes are read only when a shard is written: memory stays bounded by one shard.
        out = []
        for r in rows:
            r = dict(r)
            r["images"] = [{"bytes": (self.out_root / p).read_bytes(), "path": Path(p).name} for p in r["images"]]
            out.append(r)
        return out

    def add_sft(self, rec: SftRecord, system: str) -> None:
        self.sft.add(
            {
                "id": rec.id,
                "recipe": rec.recipe,
                "task_id": rec.task_id,
                "traj_id": rec.traj_id,
                "system": system,
                "messages": [m.model_dump() for m in rec.messages if m.role != "system"],
                "images": list(rec.images),
                "augmentation": rec.augmentation,
                "metadata": json.dumps(rec.metadata, sort_keys=True, default=str),
            }
        )

    def add_rl(self, item: RlItem) -> None:
        self.rl.add(rl_row(item.rec))

    def close(self) -> dict[str, int]:
        sft_files = self.sft.close()
        rl_files = self.rl.close()
        self._save_dataset_dict(sft_files, rl_files)
        return {"sft": self.sft.rows, "rl": self.rl.rows}

    def _save_dataset_dict(self, sft_files: list[Path], rl_files: list[Path]) -> None:
        cache = self.out_root / ".tmp" / "hf-cache"
        bars = datasets.utils.logging.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            # one load per split: the two splits have different columns
            dd = datasets.DatasetDict(
                {
                    # `datasets` cannot read a zero-row parquet file: an empty split is built from its features
                    name: datasets.load_dataset("parquet", data_files=[str(p) for p in files], split="train", cache_dir=str(cache))
                    if files
                    else datasets.Dataset.from_dict({k: [] for k in feats}, features=feats)
                    for name, files, feats in (("sft", sft_files, SFT_FEATURES), ("rl", rl_files, RL_FEATURES))
                }
            )
            tmp = self.out_root / ".tmp" / "hf-dataset"
            shutil.rmtree(tmp, ignore_errors=True)
            # an empty split has no shard to save unless asked for one (datasets 5.2)
            dd.save_to_disk(str(tmp), num_shards={k: 1 for k, d in dd.items() if len(d) == 0} or None)
            final = self.dir / "dataset"
            shutil.rmtree(final, ignore_errors=True)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            if bars:
                datasets.enable_progress_bars()


def push_to_hub(out_root: Path, repo: str, token: str) -> None:
    """Upload the saved DatasetDict and its card (network: only called when a token and a repo are configured)."""
    dd = datasets.load_from_disk(str(out_root / "hf" / "dataset"))
    dd.push_to_hub(repo, token=token)
    from huggingface_hub import HfApi

    HfApi(token=token).upload_file(
        path_or_fileobj=str(out_root / "hf" / "README.md"), path_in_repo="README.md", repo_id=repo, repo_type="dataset"
    )
