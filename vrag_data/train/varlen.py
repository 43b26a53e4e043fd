"""Attention for packed rows without flash-attn: each record of a row attends within itself, and no [L x L] mask is
ever built.

Under sdpa a packed row is one dense attention over a block-diagonal [L x L] mask built from the position ids: the
mask alone is L^2 entries (a 16k-token row: 256 M) and the attention computes every cross-record score only to mask
it out. `vrag_varlen` (registered with transformers' attention and mask interfaces) instead cuts the row where the
text positions restart (each record starts at 0, `vrag_data.train.packing`) and runs causal sdpa on each record
alone: the work and memory of the records' own attention, the same outputs. It is the language model's attention
when records are packed and flash-attn is not installed (`choose_packed_attention`); the vision tower keeps its own.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
import torch.nn.functional as F

NAME = "vrag_varlen"


def record_starts(text_positions: torch.Tensor) -> list[int]:
    """Where each record of one row starts: the positions whose text position is 0 (the row's first token always)."""
    starts = (text_positions == 0).nonzero().flatten().tolist()
    return starts if starts and starts[0] == 0 else [0, *starts]


def varlen_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                     position_ids: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: query [batch, heads, L, dim], key/value [batch, kv heads, L, dim];
    returns [batch, L, heads, dim]. `position_ids` [batch, L] (text positions) mark where records start; without them
    each row is one record."""
    groups = query.shape[1] // key.shape[1]
    if groups > 1:  # grouped-query attention: each kv head serves `groups` query heads
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    out = torch.empty_like(query)
    length = query.shape[2]
    for b in range(query.shape[0]):
        starts = record_starts(position_ids[b]) if position_ids is not None else [0]
        for s, e in zip(starts, [*starts[1:], length]):
            out[b : b + 1, :, s:e] = F.scaled_dot_product_attention(
                query[b : b + 1, :, s:e], key[b : b + 1, :, s:e], value[b : b + 1, :, s:e],
                dropout_p=dropout if module.training else 0.0, is_causal=True, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """The mask function of `vrag_varlen`: none is needed (records are cut from the position ids)."""
    return None


def register() -> None:
    """Make `vrag_varlen` an attention implementation transformers knows (attention function and mask function)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, varlen_attention)
    AttentionMaskInterface.register(NAME, _no_mask)


def flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def choose_packed_attention(model: Any, configured: str | None) -> str | None:
    """With packed records and no attention named in the config: flash-attn's varlen kernel when it is installed (and
    a GPU runs), else `vrag_varlen` for the language model. Returns what was set (None: left as it was)."""
    if configured:
        return None
    if flash_attn_installed() and torch.cuda.is_available():
        model.set_attn_implementation("flash_attention_2")
        return "flash_attention_2"
    register()
    model.config.get_text_config()._attn_implementation = NAME
    return NAME
