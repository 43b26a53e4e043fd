"""Frozen-tower features computed once per page image.

When the vision tower and its projector are frozen (the papers' SFT tables), what they make of a page image never
changes: the same page shown by several records, or again in the next epoch, gets the same features. The model's
`get_image_features` is wrapped so each image's features are looked up by a hash of its pixels and grid; only the
images not held are run through the tower (together, as before), and the features are kept in host memory up to a
byte bound (least recently used first out) and moved back to the device when a batch shows them again. Outputs are
those of the tower itself (a batch that runs only some of its images through the tower may differ in the last bits
of a float: fewer rows per matmul, another summation order).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class TowerCache:
    max_bytes: int
    held: OrderedDict[str, torch.Tensor] = field(default_factory=OrderedDict)
    size: int = 0
    hits: int = 0
    misses: int = 0

    def get(self, key: str) -> torch.Tensor | None:
        feat = self.held.get(key)
        if feat is not None:
            self.held.move_to_end(key)
        return feat

    def put(self, key: str, feat: torch.Tensor) -> None:
        n = feat.numel() * feat.element_size()
        if n > self.max_bytes or key in self.held:
            return
        self.held[key] = feat
        self.size += n
        while self.size > self.max_bytes:
            _, old = self.held.popitem(last=False)
            self.size -= old.numel() * old.element_size()

    def describe(self) -> str:
        return f"tower features: {self.hits} reused, {self.misses} computed, {len(self.held)} held ({self.size / 2**20:.0f} MiB)"


def image_key(pixels: torch.Tensor, grid: torch.Tensor) -> str:
    """One image's pixel patches and its [t, h, w] grid, hashed."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(grid.tolist()).encode())
    h.update(str(pixels.dtype).encode())
    h.update(pixels.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def tower_frozen(model: Any) -> bool:
    inner = getattr(model, "model", model)
    visual = getattr(inner, "visual", None)
    return visual is not None and not any(p.requires_grad for p in visual.parameters())


def enable_tower_cache(model: Any, max_bytes: int) -> TowerCache | None:
    """Wrap the model's `get_image_features` with a feature cache of `max_bytes` of host memory; None (nothing done)
    when the tower or the projector trains (their features change every step)."""
    inner = getattr(model, "model", model)
    if not tower_frozen(model) or not hasattr(inner, "get_image_features") or max_bytes <= 0:
        return None
    original = inner.get_image_features
    cache = TowerCache(max_bytes)

    def cached(pixel_values: torch.Tensor, image_grid_thw: torch.Tensor | None = None, **kwargs: Any) -> Any:
        if image_grid_thw is None:
            return original(pixel_values, image_grid_thw, **kwargs)
        pieces = torch.split(pixel_values, image_grid_thw.prod(-1).tolist())
        keys = [image_key(p, g) for p, g in zip(pieces, image_grid_thw)]
        feats: list[torch.Tensor | None] = [cache.get(k) for k in keys]
        todo = [i for i, f in enumerate(feats) if f is None]
        cache.hits += len(keys) - len(todo)
        cache.misses += len(todo)
        out = None
        if todo:
            out = original(torch.cat([pieces[i] for i in todo]), image_grid_thw[todo], **kwargs)
            for i, feat in zip(todo, out.pooler_output):
                feats[i] = feat
                cache.put(keys[i], feat.detach().to("cpu"))
        device = pixel_values.device
        pooled = tuple(f if f.device == device else f.to(device, non_blocking=True) for f in feats if f is not None)
        if out is None:
            from transformers.modeling_outputs import BaseModelOutputWithPooling

            out = BaseModelOutputWithPooling()
        out.last_hidden_state = None  # the tower's inner states cover only the images it ran now: not handed on
        out.pooler_output = pooled
        return out

    inner.get_image_features = cached
    return cache
