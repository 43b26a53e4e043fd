"""Causal-LM cross-entropy without the [tokens x vocab] fp32 logits.

The plain path (the model's `lm_head` over every position, then `ForCausalLMLoss`) materialises the logits of every
token of a row in fp32: for a 16k-token packed row and a 151,936-word vocabulary that is ~10 GB, kept for the
backward pass. Here the language model's last hidden states are taken at the head's input, only the positions that
carry a label are kept (an SFT row's prompt, observations and padding predict nothing), and the logits are made and
reduced `chunk_tokens` positions at a time under activation checkpointing: a chunk's logits exist only while it is
reduced, in the forward and again in the backward pass. Loss and gradients equal the plain path's (same shift, same
fp32 upcast, same `sum / num_items_in_batch` or mean).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE = -100


def _chunk_sum(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias).float()  # the plain path's upcast
    return F.cross_entropy(logits, target, reduction="sum")


def chunked_causal_lm_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
                           num_items_in_batch: torch.Tensor | int | None = None, chunk_tokens: int = 4096) -> torch.Tensor:
    """`hidden` [batch, seq, dim] at the head's input, `labels` [batch, seq] (-100: no label). Position t predicts
    labels[t + 1]. Returns the summed loss over `num_items_in_batch` when given, else the mean over labelled tokens."""
    target = F.pad(labels, (0, 1), value=IGNORE)[..., 1:].reshape(-1).to(hidden.device)
    rows = hidden.reshape(-1, hidden.shape[-1])
    keep = (target != IGNORE).nonzero().squeeze(-1)
    rows, target = rows.index_select(0, keep), target.index_select(0, keep)
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, rows.shape[0], max(1, chunk_tokens)):
        part = slice(start, start + chunk_tokens)
        total = total + checkpoint(_chunk_sum, rows[part], weight, bias, target[part], use_reentrant=False)
    if num_items_in_batch is not None:
        n = num_items_in_batch.to(total.device) if torch.is_tensor(num_items_in_batch) else num_items_in_batch
        return total / n
    return total / target.numel()  # as the plain mean: no labelled token gives nan


class HeadInput:
    """What `capture_head_input` caught: the hidden states the head was given."""

    hidden: torch.Tensor | None = None


@contextmanager
def capture_head_input(head: torch.nn.Module) -> Iterator[HeadInput]:
    """Within the block, `head` records its input and returns a [..., 1] placeholder instead of the logits: the model
    runs (through any wrapper, so a distributed wrapper's hooks fire) without making the full logits."""
    caught = HeadInput()

    def forward(hidden: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:  # noqa: ANN401
        caught.hidden = hidden
        return hidden.new_zeros((*hidden.shape[:-1], 1))

    head.forward = forward  # type: ignore[method-assign]  # an instance attribute over the class's forward
    try:
        yield caught
    finally:
        del head.forward
