"""HF `datasets` export in the Hub's layout: `hf/README.md` (the card, one config per record type: `sft`, `rl`, each
with its splits) and `hf/data/{sft,rl}-<split>-*.parquet` with `Image` features.

Images are stored once per export: an `Image` value names the shared `images/<hash>.jpg`, relative to the export
folder, so `datasets.load_dataset("hf", "sft")` run from the export folder (where every trainer of the export runs)
reads them; `push_to_hub` uploads a copy with the bytes embedded (the Hub has no `images/`). `hf_images: embed` writes
the bytes into hf/ itself (each distinct image once per shard: the bytes column is dictionary-encoded)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa

from vrag_data.errors import VragError
from vrag_data.export.card import front_matter
from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written
from vrag_data.export.io import ShardWriter, write_text
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
            "sufficient": datasets.Value("bool"),
            # the rollout keys (`vrag_data.export.rl.ROLLOUT_KEYS`), empty: a rollout fills them
            "search_results": datasets.List(datasets.List(datasets.Value("string"))),
            "selections": datasets.List({"candidates": datasets.List(datasets.Value("string")),
                                         "selected": datasets.List(datasets.Value("string"))}),
            "read_pages": datasets.List(datasets.Value("string")),
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
CONFIGS = ("sft", "rl")


class HfWriter:
    """One shard writer per (record type, split): a task's own split (a benchmark's `test`) or the RL validation
    split never lands in `train`. Images are referenced (`images/<hash>.jpg`, relative to the export folder: the
    bytes stay in the shared `images/`, once) or, with `hf_images: embed`, embedded once per shard."""

    name = "hf"

    def __init__(self, out_root: Path, shard_size: int, images: str = "reference") -> None:
        self.out_root, self.shard_size, self.images = out_root, shard_size, images
        self.dir = out_root / "hf"
        shutil.rmtree(self.dir, ignore_errors=True)  # a previous export's shards must not mix with this one
        self.writers: dict[tuple[str, str], ShardWriter] = {}

    def _writer(self, config: str, split: str) -> ShardWriter:
        w = self.writers.get((config, split))
        if w is None:
            features = SFT_FEATURES if config == "sft" else RL_FEATURES
            if self.images == "embed":
                bytes_of = _DistinctImageBytes(self.out_root)
                w = ShardWriter(self.out_root, self.dir / "data", f"{config}-{split}", "parquet", self.shard_size,
                                features.arrow_schema, prepare=bytes_of.embed, weigh=bytes_of.weigh,
                                max_bytes=SHARD_BYTES, dictionary=["images.list.element.bytes", "images.list.element.path"])
            else:
                w = ShardWriter(self.out_root, self.dir / "data", f"{config}-{split}", "parquet", self.shard_size,
                                features.arrow_schema, prepare=_image_paths)
            self.writers[(config, split)] = w
        return w

    def write_sft(self, rec: SftRecord, system: str) -> None:
        self._writer("sft", str(rec.metadata.get("split") or "train")).add(
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

    def write_rl(self, item: RlItem) -> None:
        self._writer("rl", str(item.rec.extra_info.get("split") or "train")).add(rl_row(item.rec))

    def close(self) -> Written:
        # no zero-row shards (`datasets` cannot read them): the card declares only the splits that have rows
        splits: dict[str, dict[str, int]] = {}
        for (config, split), w in sorted(self.writers.items()):
            w.close()
            splits.setdefault(config, {})[split] = w.rows
        counts = {c: sum(splits.get(c, {}).values()) for c in CONFIGS}
        # embedded Image values name no file of images/ (only the file name, for the record)
        return Written(counts, self._name_by_content(), splits, names_image_files=self.images != "embed")

    def _name_by_content(self) -> dict[str, list[str]]:
        """Shards renamed `<type>-<split>-<content hash>-NNNNN.parquet`: `datasets` caches a local dataset by its folder
        name and the card's file patterns, so two exports (both `hf/`) with the same names would load each other's
        cached rows. Returns the card's file list per `<type>/<split>`, relative to `hf/`."""
        digest = hashlib.sha256()
        for key in sorted(self.writers):
            for p in self.writers[key].paths:
                digest.update(p.name.encode())
                with p.open("rb") as f:
                    while block := f.read(1 << 20):
                        digest.update(block)
        tag = digest.hexdigest()[:12]
        files: dict[str, list[str]] = {}
        for (config, split), writer in sorted(self.writers.items()):
            for p in writer.paths:
                new = p.with_name(f"{config}-{split}-{tag}-{p.stem.rsplit('-', 1)[-1]}.parquet")
                os.replace(p, new)
                files.setdefault(f"{config}/{split}", []).append(f"data/{new.name}")
        return files


def _image_paths(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`Image` values that name the shared file (relative to the export folder) and embed nothing."""
    return [{**r, "images": [{"bytes": None, "path": p} for p in r["images"]]} for r in rows]


class HfFormat(FormatDefaults):
    """HF `datasets` in the Hub's layout; its publish step writes `hf/README.md` (the card under the `configs`
    header) and uploads the folder when `export.hub_repo` is set and the token variable holds a token."""

    name, label, entry, sft, rl = "hf", "HF dataset", "hf", True, True

    def open(self, ctx: FormatContext) -> HfWriter:
        return HfWriter(ctx.out, ctx.shard_size, ctx.cfg.hf_images)

    def card_section(self, written: Written) -> str:
        return ("- HF dataset (`hf/`): `datasets.load_dataset(\"<export>/hf\", \"sft\")` (or `\"rl\"`), "
                "one config per record type that has rows\n")

    def publish(self, ctx: FormatContext, written: Written, card: str) -> None:
        write_text(ctx.out, ctx.out / "hf" / "README.md", front_matter(written.counts, written.files, ctx.cfg.license) + card)
        token = os.environ.get(ctx.cfg.hub_token_env or "")
        if ctx.cfg.hub_repo and token:
            if ctx.publish_problems:  # checked before any upload: nothing leaves the machine
                raise VragError(f"export.hub_repo {ctx.cfg.hub_repo}: not published: " + "; ".join(ctx.publish_problems))
            push_to_hub(ctx.out, ctx.cfg.hub_repo, token)


FORMAT = HfFormat()


def push_to_hub(out_root: Path, repo: str, token: str) -> None:
    """Upload `hf/` with its images embedded (`hub_copy`) - network: only called when a token and a repo are
    configured and the card's licence check passed."""
    import tempfile

    from huggingface_hub import HfApi

    with tempfile.TemporaryDirectory(prefix="vrag-hub-") as tmp:
        folder = hub_copy(out_root, Path(tmp) / "hf")
        api = HfApi(token=token)
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset")


def hub_copy(out_root: Path, dest: Path) -> Path:
    """`hf/` copied to `dest` with every image that names a file of the export embedded (each distinct image once
    per shard), so the copy loads from anywhere, the Hub included."""
    import pyarrow.parquet as pq

    shutil.copytree(out_root / "hf", dest)
    for f in sorted((dest / "data").glob("*.parquet")):
        table = pq.read_table(f)
        rows = table.to_pylist()
        if not any(im.get("bytes") is None for r in rows for im in r.get("images") or []):
            continue
        bytes_of = _DistinctImageBytes(out_root)
        plain = [{**r, "images": [im["path"] for im in r["images"]]} for r in rows]
        pq.write_table(pa.Table.from_pylist(bytes_of.embed(plain), schema=table.schema), f,
                       compression="zstd", use_dictionary=["images.list.element.bytes", "images.list.element.path"],
                       dictionary_pagesize_limit=1 << 30)
    return dest


class _DistinctImageBytes:
    """Shard weight and image embedding for one split: a shard is cut by the bytes of its distinct images (what the
    dictionary-encoded column stores); bytes are read only when the shard is written."""

    def __init__(self, out_root: Path) -> None:
        self.out_root = out_root
        self.seen: set[str] = set()

    def weigh(self, row: dict[str, Any]) -> int:
        new = [p for p in row["images"] if p not in self.seen]
        self.seen.update(new)
        return sum((self.out_root / p).stat().st_size for p in new) + 1024

    def embed(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.seen = set()  # the next shard has its own dictionary
        cache: dict[str, bytes] = {}
        out = []
        for r in rows:
            r = dict(r)
            r["images"] = [{"bytes": cache.get(p) or cache.setdefault(p, (self.out_root / p).read_bytes()),
                            "path": Path(p).name} for p in r["images"]]
            out.append(r)
        return out
