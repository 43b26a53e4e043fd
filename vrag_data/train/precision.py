"""Mixed precision: fp32 master weights under bf16 autocast, or pure bf16 when a config asks for it.

A bf16 number has 8 bits of mantissa: an AdamW update of lr x ~1 (lr 1e-5 for SFT, 1e-6 for RL) is below half a
bf16 step for any weight above ~0.003, so a model whose trainable weights are stored in bf16 keeps most of them
bit-identical step after step. The trainable parameters (and so AdamW's states and the gradients) are therefore
kept in fp32 and only the matmuls run in bf16 under autocast; the frozen parts (vision tower, projector) stay in
the compute dtype, where they cost half the memory and lose nothing. `model.pure_bf16` keeps everything in bf16
(LLaMA-Factory's flag of the same name) and the run records it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from vrag_data.train.config import ModelConfig

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_SHORT = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class Precision:
    compute: torch.dtype = torch.float32  # the matmul dtype (autocast when it differs from `master`)
    master: torch.dtype = torch.float32  # trainable parameters, their gradients and the optimizer state

    @property
    def pure(self) -> bool:
        return self.master != torch.float32

    @property
    def uses_autocast(self) -> bool:
        return self.compute != torch.float32 and not self.pure

    def describe(self) -> str:
        if self.compute == torch.float32:
            return "fp32"
        if self.pure:
            return f"pure {_SHORT[self.master]} (weights and optimizer state in {_SHORT[self.master]})"
        return f"fp32 master weights, {_SHORT[self.compute]} autocast"

    @contextlib.contextmanager
    def autocast(self, device: torch.device | str) -> Iterator[None]:
        """Autocast to the compute dtype on `device`'s type; a no-op in fp32 and in pure bf16."""
        if not self.uses_autocast:
            yield
            return
        with torch.autocast(device_type=torch.device(device).type, dtype=self.compute):
            yield


def resolve_precision(cfg: ModelConfig, bf16_autocast: bool = False) -> Precision:
    """`bf16_autocast` (SFT's `sft.bf16`) asks for bf16 matmuls over an fp32-stored model."""
    compute = DTYPES[cfg.dtype]
    if compute == torch.float32 and bf16_autocast:
        compute = torch.bfloat16
    return Precision(compute=compute, master=compute if cfg.pure_bf16 else torch.float32)


def apply_master_weights(model: Any, precision: Precision) -> int:
    """Store every trainable parameter in the master dtype; returns how many parameters were recast."""
    n = 0
    for p in model.parameters():
        if p.requires_grad and p.dtype != precision.master:
            p.data = p.data.to(precision.master)
            n += p.numel()
    return n


def changed_fraction(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> float:
    """Share of the elements of `before` that differ in `after` (compared in fp32, keys of `before`)."""
    total = changed = 0
    for k, b in before.items():
        a = after[k]
        changed += int((a.float() != b.float()).sum())
        total += b.numel()
    return changed / max(total, 1)
