"""HF `datasets` export in the Hub's layout: `hf/README.md` (the card, one config per record type: `sft`, `rl`, each
with its splits) and `hf/data/{sft,rl}-<split>-*.parquet`.

Where the images go (`export.hf_images`):
- `folder` (default): the image-folder layout `datasets` reads with its own `imagefolder` builder: each parquet shard
  is a metadata file whose `images_file_names` column names `images/<hash>.jpg` relative to `hf/data/`, and
  `hf/data/images/` is the export's one image folder: every other format of the export names the same files
  (`hf/data/images/<hash>.jpg`, relative to the export folder), so no image is on disk twice and a copy made with
  `cp -r`, `scp -r`, `rsync -a` or a zip is the size of the export as written. `load_dataset("<copy of hf>", "sft")`
  loads the `Image` values from any working directory.
- `embed`: the bytes in the parquet itself (each distinct image once per shard: the bytes column is
  dictionary-encoded); a page shown by several configs or splits is stored in each.
- `reference`: the `Image` value names the export's shared `images/<hash>.jpg`, relative to the export folder: loads
  only from the export folder.
`push_to_hub` uploads a copy of hf/ that loads on the Hub (the referenced images embedded)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa

from vrag_data.config import ExportConfig
from vrag_data.errors import VragError
from vrag_data.export.card import front_matter
from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written, register_format
from vrag_data.export.io import ShardWriter, atomic_write, write_text
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
        "document_file": datasets.Value("string"),  # verl's `file_name`: `datasets`' image-folder loader reads that name as an image
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
    """One RL record as a row of verl's parquet; the HF `rl` config has the same columns, `file_name` named
    `document_file` (`hf_rl_row`)."""
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


def hf_rl_row(rec: RlRecord) -> dict[str, Any]:
    """The HF `rl` row: verl's row with `file_name` as `document_file` (in the image-folder layout `datasets` would load
    a `file_name` column as an image)."""
    row = rl_row(rec)
    row["document_file"] = row.pop("file_name")
    return row


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
        for p in list(self.dir.rglob("*")) if self.dir.is_dir() else []:  # a previous export's shards must not mix
            if p.is_file() and not p.is_relative_to(self.dir / IMAGE_FOLDER):  # the image folder is the export's own
                p.unlink()
        self.writers: dict[tuple[str, str], ShardWriter] = {}
        self.linked: set[str] = set()  # `folder`: the files of hf/data/images/ the rows name

    def _writer(self, config: str, split: str) -> ShardWriter:
        w = self.writers.get((config, split))
        if w is None:
            features = SFT_FEATURES if config == "sft" else RL_FEATURES
            if self.images == "folder":
                w = ShardWriter(self.out_root, self.dir / "data", f"{config}-{split}", "parquet", self.shard_size,
                                folder_schema(features.arrow_schema), prepare=self._file_names)
            elif self.images == "embed":
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
        self._writer("rl", str(item.rec.extra_info.get("split") or "train")).add(hf_rl_row(item.rec))

    def close(self) -> Written:
        # no zero-row shards (`datasets` cannot read them): the card declares only the splits that have rows
        splits: dict[str, dict[str, int]] = {}
        for (config, split), w in sorted(self.writers.items()):
            w.close()
            splits.setdefault(config, {})[split] = w.rows
        counts = {c: sum(splits.get(c, {}).values()) for c in CONFIGS}
        if self.images == "folder" and not self.linked:  # no image at all: plain parquet, an empty `images` column
            for w in self.writers.values():
                for path in w.paths:
                    _without_file_names(self.out_root, path)
        # embedded Image values name no file; `folder` and `reference` rows name files of the export's image folder
        return Written(counts, self._name_by_content(), splits, names_image_files=self.images in ("reference", "folder"),
                       image_folder=IMAGE_FOLDER if self.linked else "")

    def _file_names(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`folder` rows: `images_file_names` (relative to hf/data/, the metadata file's folder) in place of `images`:
        the export's image folder is hf/data/images/ (`HfFormat.image_dir`), so the names point at its files."""
        data = self.out_root / "hf" / "data"
        out = []
        for r in rows:
            names = []
            for rel in r["images"]:
                path = self.out_root / rel
                if not path.is_relative_to(data / "images"):
                    raise VragError(f"hf image-folder layout: {rel} is outside hf/{IMAGE_FOLDER}/, the export's image folder")
                self.linked.add(path.name)
                names.append(path.relative_to(data).as_posix())
            out.append({("images_file_names" if k == "images" else k): (names if k == "images" else v)
                        for k, v in r.items()})
        return out

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


IMAGE_FOLDER = "data/images"  # `folder`: the images of hf/, relative to hf/


def folder_schema(schema: pa.Schema) -> pa.Schema:
    """A config's schema with `images` as `images_file_names` (list of names): the `imagefolder` builder of `datasets`
    turns that column back into `images` (a list of `Image`) when it loads the metadata file."""
    return pa.schema([pa.field("images_file_names", pa.list_(pa.string())) if f.name == "images" else f for f in schema])


def _without_file_names(out_root: Path, path: Path) -> None:
    """A `folder` shard rewritten as a plain parquet shard (an export that shows no image has no image folder)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    i = table.schema.get_field_index("images_file_names")
    empty = pa.array([[] for _ in range(table.num_rows)], type=pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
    table = table.set_column(i, "images", empty)
    atomic_write(out_root, path, lambda p: pq.write_table(table, p, compression="zstd"))


def _image_paths(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`Image` values that name the shared file (relative to the export folder) and embed nothing."""
    return [{**r, "images": [{"bytes": None, "path": p} for p in r["images"]]} for r in rows]


class HfFormat(FormatDefaults):
    """HF `datasets` in the Hub's layout; its publish step writes `hf/README.md` (the card under the `configs`
    header) and uploads the folder when `export.hub_repo` is set and the token variable holds a token."""

    name, label, entry, sft, rl = "hf", "HF dataset", "hf", True, True

    def open(self, ctx: FormatContext) -> HfWriter:
        return HfWriter(ctx.out, ctx.shard_size, ctx.cfg.hf_images)

    def image_dir(self, cfg: ExportConfig) -> str | None:
        """The image-folder layout keeps the export's one image folder inside hf/ (a copied hf/ loads alone)."""
        return f"hf/{IMAGE_FOLDER}" if cfg.hf_images == "folder" else None

    def card_section(self, written: Written) -> str:
        return ("- HF dataset (`hf/`): `datasets.load_dataset(\"<export>/hf\", \"sft\")` (or `\"rl\"`), "
                "one config per record type that has rows\n")

    def publish(self, ctx: FormatContext, written: Written, card: str) -> None:
        write_text(ctx.out, ctx.out / "hf" / "README.md",
                   front_matter(written.counts, written.files, ctx.cfg.license, written.image_folder) + card)
        token = os.environ.get(ctx.cfg.hub_token_env or "")
        if ctx.cfg.hub_repo and token:
            if ctx.publish_problems:  # checked before any upload: nothing leaves the machine
                raise VragError(f"export.hub_repo {ctx.cfg.hub_repo}: not published: " + "; ".join(ctx.publish_problems))
            push_to_hub(ctx.out, ctx.cfg.hub_repo, token)


FORMAT = register_format(HfFormat())


def push_to_hub(out_root: Path, repo: str, token: str) -> None:
    """Upload `hf/` as `hub_copy` makes it (referenced images embedded; the image folder travels as it is) - network: only called when a token and a repo are
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
    per shard), so the copy loads from anywhere, the Hub included; the `folder` layout's shards are copied as they are
    (their image folder travels with them)."""
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
