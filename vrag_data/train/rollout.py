"""Multi-turn rollouts of the policy in the real environment, kept as training samples.

One episode = the recipe's prompt, then per turn: the context policy builds the messages, the policy model
samples an assistant message, `parse_action` reads it, `Environment.step` executes it and returns the
observation. Every turn is kept as (context tokens, response tokens, images): the loss only sees the response
tokens of each turn, so prompts and observations (text and image tokens) never carry gradient, whatever the
context policy does to the history (append-only or VISOR's sliding window).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from vrag_data.schema.records import ImageRef, Message
from vrag_data.train.data import IMAGE_TAG, expand_image_tags, generation_prompt, image_inputs

ImageLoader = Callable[[ImageRef], Image.Image]


@dataclass
class TurnSample:
    context_ids: list[int]
    response_ids: list[int]
    response_text: str
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    scopes: list[str] = field(default_factory=list)  # one token scope per response token (RS-GRPO)


def messages_to_chat(messages: Sequence[Message]) -> tuple[list[tuple[str, str]], list[ImageRef]]:
    """Our Message records -> (role, text with one <image> per image) + the images in order.

    A message's images come before its text, the Qwen-VL convention the teacher client uses too.
    """
    chat: list[tuple[str, str]] = []
    refs: list[ImageRef] = []
    for m in messages:
        text = m.text.replace(IMAGE_TAG, "")  # a page could contain the literal tag; only real images get one
        chat.append((m.role, IMAGE_TAG * len(m.images) + ("\n" if m.images and text else "") + text))
        refs.extend(m.images)
    return chat, refs


class PolicySampler:
    """Samples assistant turns from the policy model (HF `generate`; one sequence at a time on CPU)."""

    def __init__(self, policy: Any, load_image: ImageLoader, max_new_tokens: int, temperature: float,
                 top_p: float, default_system: str | None = None, max_context: int = 8192) -> None:
        self.policy = policy
        self.load_image = load_image
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.default_system = default_system
        self.max_context = max_context

    def encode_context(self, messages: Sequence[Message]) -> tuple[list[int], torch.Tensor | None, torch.Tensor | None]:
        chat, refs = messages_to_chat(messages)
        pixel_values = grid = None
        grids: list[list[int]] = []
        if refs:
            pixel_values, grid = image_inputs([self.load_image(r) for r in refs], self.policy.image_processor)
            grids = grid.tolist()
        text = expand_image_tags(generation_prompt(chat, self.default_system), grids,
                                 getattr(self.policy.image_processor, "merge_size", 2))
        ids = self.policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids, pixel_values, grid

    @torch.no_grad()
    def sample(self, messages: Sequence[Message]) -> TurnSample:
        ids, pixel_values, grid = self.encode_context(messages)
        if len(ids) > self.max_context:
            raise ContextTooLong(f"context of {len(ids)} tokens exceeds {self.max_context}")
        model = self.policy.model
        input_ids = torch.tensor([ids], device=model.device)
        kwargs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.temperature > 0,
            "pad_token_id": self.policy.pad_id,
            "eos_token_id": self.policy.tokenizer.eos_token_id,
        }
        if self.temperature > 0:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        if pixel_values is not None:
            kwargs.update(
                pixel_values=pixel_values.to(model.device, model.dtype),
                image_grid_thw=grid.to(model.device),
                mm_token_type_ids=(input_ids == self.policy.image_token_id).long(),
            )
        was_training = model.training
        model.eval()
        out = model.generate(**kwargs)
        model.train(was_training)
        response = out[0, len(ids):].tolist()
        eos = self.policy.tokenizer.eos_token_id
        if eos in response:  # keep the closing <|im_end|>: the policy must learn to stop
            response = response[: response.index(eos) + 1]
        text = self.policy.tokenizer.decode(response, skip_special_tokens=True)
        return TurnSample(ids, response, text, pixel_values, grid)


class ContextTooLong(Exception):
    pass


_TAG = re.compile(r"<(/?)([A-Za-z_]+)>")


def char_scopes(text: str, scope_names: Sequence[str], default: str = "other") -> list[str]:
    """Scope of every character: the innermost enclosing tag among `scope_names` (tags included), else default."""
    scopes = [default] * len(text)
    stack: list[tuple[str, int]] = []
    names = set(scope_names)
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2)
        if name not in names:
            continue
        if not closing:
            stack.append((name, m.start()))
        elif stack and stack[-1][0] == name:
            _, start = stack.pop()
            for i in range(start, m.end()):
                scopes[i] = name
    for name, start in stack:  # an unclosed tag scopes to the end of the message
        for i in range(start, len(text)):
            scopes[i] = name
    return scopes


def token_scopes(tokenizer: Any, response_ids: Sequence[int], scope_names: Sequence[str],
                 default: str = "other") -> list[str]:
    """Scope of each generated token = scope of the first character it contributes to the decoded text."""
    text = tokenizer.decode(list(response_ids), skip_special_tokens=False)
    chars = char_scopes(text, scope_names, default)
    out: list[str] = []
    prev = 0
    for k in range(1, len(response_ids) + 1):
        cur = len(tokenizer.decode(list(response_ids[:k]), skip_special_tokens=False))
        pos = min(prev, len(chars) - 1)
        out.append(chars[pos] if chars and cur > prev else (out[-1] if out else default))
        prev = max(prev, cur)
    return out
