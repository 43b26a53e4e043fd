"""Load the policy: a local pretrained Qwen2-VL / Qwen2.5-VL folder, or the tiny random model for CPU runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vrag_data.errors import VragError
from vrag_data.train.config import ModelConfig, TinyModelConfig
from vrag_data.train.precision import DTYPES as _DTYPES
from vrag_data.train.precision import Precision, apply_master_weights, resolve_precision
from vrag_data.train.tiny import IMAGE_PAD, build_tiny_model, make_image_processor, train_tokenizer


@dataclass
class Policy:
    model: Any
    tokenizer: Any
    image_processor: Any
    precision: Precision = field(default_factory=Precision)

    def autocast(self) -> Any:
        """The compute-dtype autocast for forwards and generation on the model's device."""
        return self.precision.autocast(next(self.model.parameters()).device)

    @property
    def image_token_id(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(IMAGE_PAD))

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def save(self, out: Path, dtype: str | None = None) -> None:
        """The model folder (safetensors); `dtype` ("bfloat16", ...): its floating tensors written in that type (a final
        model for loading), else as trained (a resumable checkpoint keeps the fp32 master weights)."""
        out.mkdir(parents=True, exist_ok=True)
        if dtype is not None:
            # cast on the host (no second copy of the weights on the device at the end of a run); a tensor shared by
            # two names (tied embeddings) stays one tensor, so the save still sees the tie
            cast, done = _DTYPES[dtype], {}
            state = {}
            for k, v in self.model.state_dict().items():
                if v.is_floating_point():
                    key = (v.data_ptr(), v.dtype, tuple(v.shape))
                    v = done.setdefault(key, v.detach().to(device="cpu", dtype=cast))
                state[k] = v
            self.model.save_pretrained(out, state_dict=state)
        else:
            self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        self.image_processor.save_pretrained(out)


def save_bytes(model: Any, dtype: str | None = None, optimizer: bool = False) -> int:
    """About what a save of `model` writes: its tensors in `dtype` (None: as stored), plus AdamW's two fp32 states of
    every trainable parameter when the optimizer is saved."""
    size = _DTYPES[dtype].itemsize if dtype is not None else None
    total = sum(p.numel() * (size or p.element_size()) for p in model.parameters())
    if optimizer:
        total += sum(2 * 4 * p.numel() for p in model.parameters() if p.requires_grad)
    return total


def load_policy(cfg: ModelConfig, texts: Iterable[str] = (), bf16_autocast: bool = False) -> Policy:
    """`texts` only matter for the tiny model: its tokenizer is trained on them (plus built-in agent text).

    The model is stored in `cfg.dtype`, then its trainable parameters are recast to fp32 master weights unless
    `cfg.pure_bf16` (see `precision`); `bf16_autocast` = bf16 matmuls over an fp32 model (SFT's `sft.bf16`)."""
    precision = resolve_precision(cfg, bf16_autocast)
    if cfg.path:
        # read in the master dtype (bf16 -> fp32 is exact) so a checkpoint's fp32 master weights survive a resume;
        # the frozen parts go back to the compute dtype below
        policy = _load_pretrained(cfg, precision.master)
    else:
        tiny = cfg.tiny or TinyModelConfig()
        tokenizer = train_tokenizer(texts, vocab_size=tiny.vocab_size)
        model = build_tiny_model(tiny, tokenizer).to(_DTYPES[cfg.dtype])
        if cfg.attn_implementation:
            model.set_attn_implementation(cfg.attn_implementation)
        policy = Policy(model, tokenizer, make_image_processor(cfg.min_pixels, cfg.max_pixels))
    apply_freezing(policy.model, cfg)
    if cfg.gradient_checkpointing:
        enable_checkpointing(policy.model)
    apply_master_weights(policy.model, precision)
    for p in policy.model.parameters():
        if not p.requires_grad and p.dtype != precision.compute:
            p.data = p.data.to(precision.compute)
    policy.precision = precision
    return policy


def _load_pretrained(cfg: ModelConfig, dtype: torch.dtype) -> Policy:
    from transformers import AutoModelForImageTextToText, AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    path = Path(cfg.path or "")
    if not (path / "config.json").is_file():
        raise VragError(f"{path}: not a local model folder (config.json missing); download the weights first "
                        "and set model.path, or use model.tiny for a CPU test model")
    kwargs: dict[str, Any] = {"dtype": dtype}
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    model = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The PIL image processor reads the same preprocessor_config.json and needs no torchvision.
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(path, min_pixels=cfg.min_pixels,
                                                               max_pixels=cfg.max_pixels)
    return Policy(model, tokenizer, image_processor)


def _vision(model: Any) -> Any:
    inner = getattr(model, "model", model)
    return getattr(inner, "visual", None)


def apply_freezing(model: Any, cfg: ModelConfig) -> dict[str, int]:
    """Freeze vision tower / projector (the merger) / language model as the papers' SFT tables do."""
    visual = _vision(model)
    frozen = {"vision_tower": 0, "projector": 0, "language_model": 0}
    if visual is not None:
        for name, p in visual.named_parameters():
            is_proj = name.startswith("merger.")
            if (is_proj and cfg.freeze_projector) or (not is_proj and cfg.freeze_vision_tower):
                p.requires_grad_(False)
                frozen["projector" if is_proj else "vision_tower"] += p.numel()
    if cfg.freeze_language_model:
        vis_ids = {id(p) for p in visual.parameters()} if visual is not None else set()
        for p in model.parameters():
            if id(p) not in vis_ids:
                p.requires_grad_(False)
                frozen["language_model"] += p.numel()
    return frozen


def _no_grad_on(module: Any, inputs: Any) -> None:
    module._vrag_grad_was = torch.is_grad_enabled()
    torch.set_grad_enabled(False)


def _no_grad_off(module: Any, inputs: Any, output: Any) -> None:
    torch.set_grad_enabled(getattr(module, "_vrag_grad_was", True))


def enable_checkpointing(model: Any) -> None:
    """Activation checkpointing on the language-model layers only.

    A frozen vision tower has nothing to train: its blocks are not checkpointed (checkpointing would recompute
    them in the backward pass whenever anything upstream asks for input gradients, as
    `enable_input_require_grads` does) and, when the projector is frozen too, the whole tower runs without
    autograd, so it is run once per step and keeps no activations.
    """
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    visual = _vision(model)
    if visual is None or any(p.requires_grad for n, p in visual.named_parameters() if not n.startswith("merger.")):
        return
    for m in visual.modules():
        if hasattr(m, "gradient_checkpointing"):
            m.gradient_checkpointing = False
    if not any(p.requires_grad for p in visual.parameters()):
        # hooks rather than a wrapped forward: they survive the deepcopy that makes RL's reference model
        visual.register_forward_pre_hook(_no_grad_on)
        visual.register_forward_hook(_no_grad_off)


def describe_attention(model: Any, packing: bool = False) -> str:
    """One line naming the attention kernels that run (language model, vision tower, packed records)."""
    text = getattr(getattr(model, "config", None), "get_text_config", lambda: None)()
    impl = getattr(text, "_attn_implementation", None) or getattr(model.config, "_attn_implementation", "?")
    visual = _vision(model)
    vis_impl = getattr(getattr(visual, "config", None), "_attn_implementation", None) if visual is not None else None
    parts = [f"attention: {impl} (language model)"]
    if vis_impl:
        parts.append(f"{vis_impl} (vision tower{', one call per window' if vis_impl in ('sdpa', 'eager') else ''})")
    if impl == "sdpa" and torch.cuda.is_available():
        b = torch.backends.cuda
        allowed = [n for n, on in (("flash", b.flash_sdp_enabled()), ("mem_efficient", b.mem_efficient_sdp_enabled()),
                                   ("math", b.math_sdp_enabled())) if on]
        parts.append("sdpa backends allowed: " + "/".join(allowed))
    if packing:
        parts.append("packed records: " + ("varlen by position ids" if "flash" in str(impl)
                                           else "one causal sdpa per record, cut at the position ids (no L x L mask)"
                                           if impl == "vrag_varlen" else "block-diagonal causal mask from position ids"))
    return "; ".join(parts)
