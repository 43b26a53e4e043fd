"""SFT records -> Qwen2-VL model inputs.

A record is a list of chat turns whose text holds one `<image>` per image, plus the image paths (the
`SftRecord` / LLaMA-Factory sharegpt layout). Each `<image>` becomes `<|vision_start|>` + one
`<|image_pad|>` per merged vision patch + `<|vision_end|>`, so the text and the image grid agree. Labels
are -100 everywhere except the assistant turns' content and their closing `<|im_end|>`: the system prompt,
the user turns (question and every observation) and the role headers are never trained on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from vrag_data.errors import VragError
from vrag_data.train.tiny import IM_END, IM_START, IMAGE_PAD, VISION_END, VISION_START

IGNORE = -100
IMAGE_TAG = "<image>"
_ROLE_ALIASES = {"human": "user", "gpt": "assistant", "observation": "user", "function_call": "assistant"}


@dataclass
class SftExample:
    """One conversation with absolute image paths; `source` names the file + row for error messages."""

    messages: list[tuple[str, str]]
    images: list[Path | bytes]
    source: str = ""


@dataclass
class Encoded:
    input_ids: list[int]
    labels: list[int]
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- reading exports


def _rows_from_json(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    data = json.loads(path.read_text())
    if not isinstance(data, list):
        raise VragError(f"{path}: expected a JSON list of conversations (sharegpt), got {type(data).__name__}")
    return data


def _llamafactory_files(info: Path) -> list[Path]:
    entries = json.loads(info.read_text())
    files: list[Path] = []
    for e in entries.values():
        if not isinstance(e, dict) or "file_name" not in e:
            continue
        target = info.parent / e["file_name"]  # a file, or a folder of json parts
        files.extend(sorted(p for p in target.rglob("*") if p.suffix in (".json", ".jsonl")) if target.is_dir() else [target])
    return files


def _files_in(folder: Path) -> list[Path]:
    """The SFT files of an export: the root written by `vrag-data export` (its LLaMA-Factory part, else the
    HF `sft` split), a LLaMA-Factory folder (dataset_info.json), an HF folder (data/sft-*.parquet), or plain
    json/jsonl/parquet files."""
    for info in (folder / "dataset_info.json", folder / "llamafactory" / "dataset_info.json"):
        if info.is_file():
            return _llamafactory_files(info)
    for base in ("hf/data", "data"):
        files = sorted(folder.glob(f"{base}/sft-*.parquet"))
        if files:  # HF shards are named by split: `sft-train-*`, `sft-test-*`; only the train split is trained on
            train = [f for f in files if f.name.startswith("sft-train-")]
            if not train:
                raise VragError(f"{folder / base}: no train split among its SFT shards ({files[0].name}, ...); "
                                "a test or validation split is never trained on")
            return train
    skip = {"summary.json", "dataset_dict.json", "state.json", "dataset_info.json"}
    return sorted(p for p in folder.iterdir() if p.suffix in (".json", ".jsonl", ".parquet") and p.name not in skip)


def _rows_from_file(path: Path) -> list[dict[str, Any]]:
    if path.suffix in (".json", ".jsonl"):
        return _rows_from_json(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise VragError(f"{path}: unsupported SFT data file; pass a .json/.jsonl/.parquet export or its folder")


def _maybe_json(value: Any) -> Any:
    # parquet shards written by the store keep nested fields as JSON strings
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _image_path(item: Any, bases: Sequence[Path]) -> Path | bytes:
    """An image entry -> a path (relative ones tried against each base: the data file's folder, then the
    export root, where LLaMA-Factory's media_dir points) or the encoded bytes of an HF Image feature."""
    if isinstance(item, dict):  # HF Image feature {"bytes", "path"} / verl style {"image": ...}
        if item.get("bytes"):
            return bytes(item["bytes"])
        item = item.get("path") or item.get("image")
    if not isinstance(item, str) or not item:
        raise VragError(f"image entry {str(item)[:60]!r} is neither a path nor image bytes")
    p = Path(item)
    if p.is_absolute():
        return p
    candidates = [b / p for b in bases]
    return next((c for c in candidates if c.is_file()), candidates[0])


def row_to_example(row: dict[str, Any], bases: Sequence[Path], source: str) -> SftExample:
    """Accepts `messages` [{role, content}] (SftRecord / sharegpt "messages") or `conversations` [{from, value}]."""
    turns = _maybe_json(row.get("messages") or row.get("conversations"))
    if not isinstance(turns, list) or not turns:
        raise VragError(f"{source}: no `messages`/`conversations` list; re-export with `vrag-data export`")
    messages: list[tuple[str, str]] = []
    system = row.get("system")
    if isinstance(system, str) and system:
        messages.append(("system", system))
    for t in turns:
        role = t.get("role") or t.get("from")
        text = t.get("content") if "content" in t else t.get("value")
        role = _ROLE_ALIASES.get(role, role)
        if role not in ("system", "user", "assistant") or not isinstance(text, str):
            raise VragError(f"{source}: bad turn {str(t)[:80]!r}; roles must be system/user/assistant with text")
        messages.append((role, text))
    # an HF image-folder shard names its files in `images_file_names` (relative to the shard's folder)
    listed = row["images"] if "images" in row else row.get("images_file_names")
    images = [_image_path(i, bases) for i in (_maybe_json(listed) or [])]
    n_tags = sum(text.count(IMAGE_TAG) for _, text in messages)
    if n_tags != len(images):
        raise VragError(f"{source}: {n_tags} <image> tags but {len(images)} images; each image needs one tag")
    if not any(role == "assistant" for role, _ in messages):
        raise VragError(f"{source}: no assistant turn to train on")
    return SftExample(messages=messages, images=images, source=source)


def load_sft_examples(path: str | Path, max_samples: int | None = None) -> tuple[list[SftExample], list[str]]:
    """Read an SFT export. Returns (examples, errors): a bad record is reported and skipped, never fatal."""
    p = Path(path)
    if not p.exists():
        raise VragError(f"{p}: SFT data not found; pass --data with an export folder or file")
    files = _files_in(p) if p.is_dir() else [p]
    if not files:
        raise VragError(f"{p}: no .json/.jsonl/.parquet SFT files inside; run `vrag-data export` first")
    examples: list[SftExample] = []
    errors: list[str] = []
    held_out = 0
    for f in files:
        for i, row in enumerate(_rows_from_file(f)):
            src = f"{f.name}#{i}"
            if _row_split(row) not in ("", "train"):
                held_out += 1  # a record of a test (or validation) task: never trained on
                continue
            try:
                ex = row_to_example(row, [f.parent, *f.parent.parents[:3], p if p.is_dir() else p.parent], src)
                missing = [str(x) for x in ex.images if isinstance(x, Path) and not x.is_file()]
                if missing:
                    raise VragError(f"{src}: image file(s) missing: {missing[:2]}")
                examples.append(ex)
            except VragError as err:
                errors.append(str(err))
            if max_samples is not None and len(examples) >= max_samples:
                return examples, errors
    if held_out and not examples and not errors:
        raise VragError(f"{p}: all {held_out} records are of test or validation tasks; training reads train records only")
    return examples, errors


def _row_split(row: dict[str, Any]) -> str:
    """The split an exported SFT row names (`metadata.split`, a JSON string in HF rows), "" when it names none."""
    meta = row.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return ""
    return str(meta.get("split") or "") if isinstance(meta, dict) else ""


# ---------------------------------------------------------------- encoding


def _open(im: Image.Image | Path | bytes) -> Image.Image:
    if isinstance(im, Image.Image):
        return im.convert("RGB")
    return Image.open(io.BytesIO(im) if isinstance(im, bytes) else im).convert("RGB")


def image_inputs(images: Sequence[Image.Image | Path | bytes], image_processor: Any) -> tuple[torch.Tensor, torch.Tensor]:
    pil = [_open(im) for im in images]
    out = image_processor(images=pil, return_tensors="pt")
    return out["pixel_values"], out["image_grid_thw"]


def expand_image_tags(text: str, grids: Sequence[Sequence[int]], merge_size: int) -> str:
    """Replace each `<image>` with the vision markers and as many pads as the image has merged patches."""
    parts = text.split(IMAGE_TAG)
    if len(parts) - 1 != len(grids):
        raise ValueError(f"{len(parts) - 1} <image> tags for {len(grids)} images")
    out = [parts[0]]
    for grid, rest in zip(grids, parts[1:], strict=True):
        n = int(grid[0]) * int(grid[1]) * int(grid[2]) // (merge_size**2)
        out.append(VISION_START + IMAGE_PAD * n + VISION_END + rest)
    return "".join(out)


def render_segments(messages: Sequence[tuple[str, str]], default_system: str | None) -> Iterator[tuple[str, bool]]:
    """(text, trained) pieces in Qwen2-VL chat layout; trained = assistant content and its `<|im_end|>`."""
    if default_system and (not messages or messages[0][0] != "system"):
        yield f"{IM_START}system\n{default_system}{IM_END}\n", False
    for role, text in messages:
        if role == "assistant":
            yield f"{IM_START}assistant\n", False
            yield f"{text}{IM_END}", True
            yield "\n", False
        else:
            yield f"{IM_START}{role}\n{text}{IM_END}\n", False


def generation_prompt(messages: Sequence[tuple[str, str]], default_system: str | None) -> str:
    """The context text for sampling the next assistant turn."""
    body = "".join(t for t, _ in render_segments(messages, default_system))
    return body + f"{IM_START}assistant\n"


def encode_example(
    ex: SftExample,
    tokenizer: Any,
    image_processor: Any,
    cutoff_len: int,
    default_system: str | None = None,
) -> Encoded:
    """Token ids + labels (-100 off the assistant turns) + pixel inputs, cut at `cutoff_len` tokens.

    When the cut falls inside an image's placeholder run, the sequence is cut before that image instead, and the
    images past the cut are dropped with their pixels, so placeholders and vision features always match.
    """
    merge = getattr(image_processor, "merge_size", 2)
    pixel_values = grid = None
    grids: list[list[int]] = []
    if ex.images:
        pixel_values, grid = image_inputs(ex.images, image_processor)
        grids = grid.tolist()
    ids: list[int] = []
    labels: list[int] = []
    g = 0
    for text, trained in render_segments(ex.messages, default_system):
        n_img = text.count(IMAGE_TAG)
        text = expand_image_tags(text, grids[g : g + n_img], merge)
        g += n_img
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids.extend(piece)
        labels.extend(piece if trained else [IGNORE] * len(piece))
    truncated = len(ids) > cutoff_len
    if truncated:
        ids, labels = ids[:cutoff_len], labels[:cutoff_len]
        vs = tokenizer.convert_tokens_to_ids(VISION_START)
        ve = tokenizer.convert_tokens_to_ids(VISION_END)
        starts = [i for i, t in enumerate(ids) if t == vs]
        complete = ids.count(ve)
        if len(starts) > complete:  # the last image is cut: end the sequence before it
            cut = starts[complete]
            ids, labels = ids[:cut], labels[:cut]
        if grid is not None:
            keep = complete
            n_patches = int(grid[:keep].prod(-1).sum()) if keep else 0
            pixel_values = pixel_values[:n_patches] if keep else None
            grid = grid[:keep] if keep else None
    return Encoded(input_ids=ids, labels=labels, pixel_values=pixel_values, image_grid_thw=grid, truncated=truncated)


def _image_size(im: Path | bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(im) if isinstance(im, bytes) else im) as f:  # reads the header, not the pixels
        return f.size


def record_length(ex: SftExample, tokenizer: Any, image_processor: Any, default_system: str | None = None) -> int:
    """The token count `encode_example` gives `ex` before the cut, from the text and the image sizes alone
    (length-grouped batches and packing need every length up front; decoding every image for it would not pay)."""
    merge = getattr(image_processor, "merge_size", 2)
    grids = []
    for im in ex.images:
        w, h = _image_size(im)
        grids.append([1, 1, image_processor.get_number_of_image_patches(h, w)])
    n, g = 0, 0
    for text, _ in render_segments(ex.messages, default_system):
        k = text.count(IMAGE_TAG)
        n += len(tokenizer(expand_image_tags(text, grids[g : g + k], merge), add_special_tokens=False)["input_ids"])
        g += k
    return n


class SftDataset(torch.utils.data.Dataset):
    """Encodes lazily so images are decoded only when a batch needs them."""

    def __init__(self, examples: list[SftExample], tokenizer: Any, image_processor: Any, cutoff_len: int,
                 default_system: str | None = None) -> None:
        self.examples = examples
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.cutoff_len = cutoff_len
        self.default_system = default_system

    def __len__(self) -> int:
        return len(self.examples)

    def lengths(self) -> list[int]:
        return [record_length(ex, self.tokenizer, self.image_processor, self.default_system) for ex in self.examples]

    def __getitem__(self, i: int) -> Encoded:
        return encode_example(self.examples[i], self.tokenizer, self.image_processor, self.cutoff_len,
                              self.default_system)


def collate(batch: Sequence[Encoded], pad_id: int, image_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch; `mm_token_type_ids` marks image tokens (Qwen2-VL's M-RoPE needs it)."""
    width = max(len(b.input_ids) for b in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, b in enumerate(batch):
        n = len(b.input_ids)
        ids[i, :n] = torch.tensor(b.input_ids)
        labels[i, :n] = torch.tensor(b.labels)
        mask[i, :n] = 1
    out: dict[str, torch.Tensor] = {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": mask,
        "mm_token_type_ids": (ids == image_token_id).long() * mask,
    }
    pix = [b.pixel_values for b in batch if b.pixel_values is not None]
    if pix:
        out["pixel_values"] = torch.cat(pix)
        out["image_grid_thw"] = torch.cat([b.image_grid_thw for b in batch if b.image_grid_thw is not None])
    return out
