"""Sequence packing for SFT: several records per row, attention never crossing from one record to another.

Records are binned first-fit-decreasing by their exact token length (computed from the text and the image sizes,
without decoding pixels). A packed row carries per-record position ids: row 0 the text positions restarting at 0
for every record, rows 1-3 Qwen2-VL's M-RoPE positions of each record computed as if it were alone. Transformers
reads the restarts of row 0 as packed sequences (only when the forward gets no attention mask and no KV cache:
`use_cache=False`): flash attention runs varlen, sdpa/eager get a block-diagonal causal mask. So a packed row gives every record the same logits as the record alone (LLaMA-Factory's
`neat_packing`); the label of each record's first token is ignored so no record is trained to follow another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from vrag_data.train.data import IGNORE, Encoded, SftDataset

PACKED_LENGTHS = "packed_lengths"  # collate -> trainer: record lengths per row (popped before the forward)


def pack_bins(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: indices grouped so each group's lengths sum to at most `capacity` (a longer item
    gets a bin of its own). Ties keep the input order, so the result is deterministic."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        n = lengths[i]
        for b, free in enumerate(room):
            if n <= free:
                bins[b].append(i)
                room[b] -= n
                break
        else:
            bins.append([i])
            room.append(capacity - n)
    return bins


class PackedSftDataset(torch.utils.data.Dataset):
    """Item = one bin of records, encoded lazily (images decoded only when the bin is batched)."""

    def __init__(self, records: SftDataset, lengths: Sequence[int], capacity: int) -> None:
        self.records = records
        self.bins = pack_bins([min(n, records.cutoff_len) for n in lengths], capacity)

    def __len__(self) -> int:
        return len(self.bins)

    def __getitem__(self, i: int) -> list[Encoded]:
        return [self.records[j] for j in self.bins[i]]


def collate_packed(rows: Sequence[Sequence[Encoded]], pad_id: int, image_token_id: int) -> dict[str, Any]:
    """Rows of packed records -> input_ids / labels / mm_token_type_ids [rows, width] (right-padded, no attention
    mask: the position ids the trainer adds carry the record boundaries) + images in token order."""
    width = max(sum(len(e.input_ids) for e in row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    lengths: list[list[int]] = []
    pix: list[torch.Tensor] = []
    grids: list[torch.Tensor] = []
    for r, row in enumerate(rows):
        at = 0
        lengths.append([])
        for e in row:
            n = len(e.input_ids)
            ids[r, at : at + n] = torch.tensor(e.input_ids)
            labels[r, at : at + n] = torch.tensor(e.labels)
            if n:
                labels[r, at] = IGNORE  # never predicted from the previous record's last token
            lengths[-1].append(n)
            at += n
            if e.pixel_values is not None and e.image_grid_thw is not None:
                pix.append(e.pixel_values)
                grids.append(e.image_grid_thw)
        if at < width:
            lengths[-1].append(width - at)  # the padding tail: a segment of its own, all labels ignored
    out: dict[str, Any] = {"input_ids": ids, "labels": labels,
                           "mm_token_type_ids": (ids == image_token_id).long(), PACKED_LENGTHS: lengths}
    if pix:
        out["pixel_values"] = torch.cat(pix)
        out["image_grid_thw"] = torch.cat(grids)
    return out


def _image_runs(mm: torch.Tensor) -> int:
    """Number of contiguous image-token runs (= images) in a 1-D token-type row."""
    if mm.numel() == 0:
        return 0
    starts = (mm[1:] == 1) & (mm[:-1] == 0)
    return int(starts.sum()) + int(mm[0] == 1)


def packed_position_ids(model: Any, input_ids: torch.Tensor, mm_token_type_ids: torch.Tensor,
                        image_grid_thw: torch.Tensor | None, lengths: Sequence[Sequence[int]]) -> torch.Tensor:
    """[4, rows, width]: text positions restarting per record, then each record's own M-RoPE positions (from the
    model's `get_rope_index`, so Qwen2-VL and Qwen2.5-VL each get their own rule)."""
    rope_index = getattr(model, "model", model).get_rope_index
    rows, width = input_ids.shape
    pos = torch.zeros((4, rows, width), dtype=torch.long, device=input_ids.device)
    g = 0
    for r in range(rows):
        at = 0
        for n in lengths[r]:
            mm = mm_token_type_ids[r, at : at + n]
            k = _image_runs(mm)
            text = torch.arange(n, device=input_ids.device)
            pos[0, r, at : at + n] = text
            if k:
                grid = image_grid_thw[g : g + k] if image_grid_thw is not None else None
                rope, _ = rope_index(input_ids[r : r + 1, at : at + n], mm_token_type_ids=mm[None],
                                     image_grid_thw=grid)
                pos[1:, r, at : at + n] = rope[:, 0]
                g += k
            else:
                pos[1:, r, at : at + n] = text
            at += n
    return pos
