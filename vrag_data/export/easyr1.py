"""EasyR1 jsonl export for EVisRAG's RS-GRPO: `prompt` (one `<image>` per image), `answer` (ground truth with
`<evidence>[i]: ...` lines, images 1-indexed, and `<answer>`), `image` (paths relative to the export root,
which `easyr1/data_config.yaml` passes as `image_dir`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from vrag_data.export.io import ShardWriter, write_text


class EasyR1Writer:
    name = "easyr1"

    def __init__(self, out_root: Path, shard_size: int) -> None:
        self.out_root, self.shard_size = out_root, shard_size
        self.dir = out_root / "easyr1"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.writers: dict[str, ShardWriter] = {}

    def add_row(self, split: str, row: dict) -> None:
        w = self.writers.get(split)
        if w is None:
            w = self.writers[split] = ShardWriter(self.out_root, self.dir / split, "part", "jsonl", self.shard_size)
        w.add(row)

    def close(self) -> dict[str, int]:
        if not self.writers:  # an empty train split: counted, no shard written
            self.writers["train"] = ShardWriter(self.out_root, self.dir / "train", "part", "jsonl", self.shard_size)
        counts = {}
        for split, w in sorted(self.writers.items()):
            w.close()  # no zero-row shards: `datasets` cannot read them
            counts[split] = w.rows
        data: dict = {"train_files": str((self.dir / "train").resolve())}
        for split in sorted(self.writers):
            if split != "train":
                data["val_files"] = str((self.dir / split).resolve())
        cfg = {
            "data": {
                **data,
                "prompt_key": "prompt",
                "answer_key": "answer",
                "image_key": "image",
                "image_dir": str(self.out_root.resolve()),
            }
        }
        write_text(self.out_root, self.dir / "data_config.yaml", yaml.safe_dump(cfg, sort_keys=False))
        return counts
