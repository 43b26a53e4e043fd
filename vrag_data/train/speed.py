"""Throughput the trainer reports about itself: tokens/s and model-FLOPs utilisation (MFU).

MFU = tokens/s x 6 x N / peak, N = the language model's parameters (embeddings included, the vision tower not:
its forward on the image patches is left out, so the figure is a slight underestimate), peak = the GPU's dense
bf16 tensor-core FLOP/s. 6N counts forward (2N) + backward (4N) per token and ignores attention's own FLOPs
(small at these lengths). Activation checkpointing's recompute is not counted: it is overhead, not model work.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger("vrag_data.train")

# dense bf16 peak (no sparsity), from the vendors' data sheets; matched on torch.cuda.get_device_name()
PEAK_BF16_TFLOPS = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # SXM / HBM3
    ("H800", 989.0),
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("A10G", 70.0),
    ("RTX 4090", 165.0),
)


def note(message: str) -> None:
    """One line to stderr and to the `vrag_data.train` logger (a flow's task log)."""
    print(message, file=sys.stderr, flush=True)
    log.info(message)


def peak_tflops(override: float | None = None) -> float | None:
    """The device's bf16 peak in TFLOP/s: `override`, else looked up by the CUDA device name; None on CPU or an
    unlisted GPU (MFU is then not reported; set sft.peak_tflops)."""
    if override:
        return float(override)
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16_TFLOPS if k in name), None)


def language_model_params(model: Any) -> int:
    inner = getattr(model, "model", model)
    visual = getattr(inner, "visual", None)
    vis = {id(p) for p in visual.parameters()} if visual is not None else set()
    return sum(p.numel() for p in model.parameters() if id(p) not in vis)


def mfu(tokens_per_s: float, n_params: int, peak: float | None) -> float | None:
    """Model-FLOPs utilisation in [0, 1] (6 N FLOPs per trained token); None without a known peak."""
    if not peak:
        return None
    return tokens_per_s * 6.0 * n_params / (peak * 1e12)
