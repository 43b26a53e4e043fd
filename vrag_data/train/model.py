"""Load the policy: a local pretrained Qwen2-VL / Qwen2.5-VL folder, or the tiny random model for CPU runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vrag_data.errors import VragError
from vrag_data.train.config import ModelConfig, TinyModelConfig
from vrag_data.train.tiny import IMAGE_PAD, build_tiny_model, make_image_processor, train_tokenizer

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Policy:
    model: Any
    tokenizer: Any
    image_processor: Any

    @property
    def image_token_id(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(IMAGE_PAD))

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        self.image_processor.save_pretrained(out)


def load_policy(cfg: ModelConfig, texts: Iterable[str] = ()) -> Policy:
    """`texts` only matter for the tiny model: its tokenizer is trained on them (plus built-in agent text)."""
    if cfg.path:
        return _load_pretrained(cfg)
    tiny = cfg.tiny or TinyModelConfig()
    tokenizer = train_tokenizer(texts, vocab_size=tiny.vocab_size)
    model = build_tiny_model(tiny, tokenizer).to(_DTYPES[cfg.dtype])
    policy = Policy(model, tokenizer, make_image_processor(cfg.min_pixels, cfg.max_pixels))
    apply_freezing(policy.model, cfg)
    return policy


def _load_pretrained(cfg: ModelConfig) -> Policy:
    from transformers import AutoModelForImageTextToText, AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    path = Path(cfg.path or "")
    if not (path / "config.json").is_file():
        raise VragError(f"{path}: not a local model folder (config.json missing); download the weights first "
                        "and set model.path, or use model.tiny for a CPU test model")
    kwargs: dict[str, Any] = {"dtype": _DTYPES[cfg.dtype]}
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    model = AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The PIL image processor reads the same preprocessor_config.json and needs no torchvision.
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(path, min_pixels=cfg.min_pixels,
                                                               max_pixels=cfg.max_pixels)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    apply_freezing(model, cfg)
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
