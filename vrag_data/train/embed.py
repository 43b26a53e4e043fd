"""Trajectory embedders for SPO. The default is offline and deterministic: a hashed bag of words.

MM-Doc-R1 embeds trajectories with a frozen dense text encoder; any object with `embed(texts) -> list[vector]`
plugs in through `RlConfig.embedder = "package.module:factory"` (the factory is called with no arguments).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

_WORD = re.compile(r"\w+", re.UNICODE)


class TrajectoryEmbedder(Protocol):
    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class HashedBowEmbedder:
    """Words (lower-cased) hashed into `dim` buckets, sublinear counts, L2-normalised; cosine >= 0 always."""

    def __init__(self, dim: int = 1024) -> None:
        self.dim = dim

    def _bucket(self, word: str) -> int:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word, n in Counter(_WORD.findall(text.lower())).items():
                vec[self._bucket(word)] += 1.0 + math.log(n)
            norm = math.sqrt(sum(v * v for v in vec))
            out.append([v / norm for v in vec] if norm > 0 else vec)
        return out


def load_embedder(spec: str) -> TrajectoryEmbedder:
    if spec in ("hashed-bow", "", None):
        return HashedBowEmbedder()
    if ":" not in spec:
        raise ValueError(f"embedder {spec!r}: use 'hashed-bow' or 'package.module:factory'")
    module, _, attr = spec.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory()
