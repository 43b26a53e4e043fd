"""Multi-turn rollouts of the policy in the real environment, kept as training samples.

One episode = the recipe's prompt, then per turn: the context policy builds the messages, the policy model
samples an assistant message, `parse_action` reads it, `Environment.step` executes it and returns the
observation. Every turn is kept as (context tokens, response tokens, images): the loss only sees the response
tokens of each turn, so prompts and observations (text and image tokens) never carry gradient, whatever the
context policy does to the history (append-only or VISOR's sliding window).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from vrag_data.schema.records import ImageRef, Message
from vrag_data.train.data import IMAGE_TAG, expand_image_tags, generation_prompt, image_inputs
from vrag_data.train.engines import Engine, GenRequest, HfEngine

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
    """Samples assistant turns from the policy through a generation engine (`engines`): `sample` one at a time,
    `sample_async` through a `RoundBatcher` that turns the concurrent episodes' requests into one call."""

    def __init__(self, policy: Any, load_image: ImageLoader, max_new_tokens: int, temperature: float,
                 top_p: float, default_system: str | None = None, max_context: int = 8192,
                 engine: Engine | None = None) -> None:
        self.policy = policy
        self.load_image = load_image
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.default_system = default_system
        self.max_context = max_context
        self.engine: Engine = engine or HfEngine(policy, max_new_tokens, temperature, top_p)
        self.batcher = RoundBatcher(self.engine.generate)

    def encode_context(self, messages: Sequence[Message]) -> tuple[list[int], torch.Tensor | None, torch.Tensor | None]:
        ids, pixel_values, grid, _ = self._encode(messages)
        return ids, pixel_values, grid

    def _encode(self, messages: Sequence[Message]) -> tuple[list[int], torch.Tensor | None, torch.Tensor | None, list[Any]]:
        chat, refs = messages_to_chat(messages)
        pixel_values = grid = None
        grids: list[list[int]] = []
        images = [self.load_image(r) for r in refs]
        if refs:
            pixel_values, grid = image_inputs(images, self.policy.image_processor)
            grids = grid.tolist()
        text = expand_image_tags(generation_prompt(chat, self.default_system), grids,
                                 getattr(self.policy.image_processor, "merge_size", 2))
        ids = self.policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids, pixel_values, grid, images

    def request(self, messages: Sequence[Message]) -> GenRequest:
        ids, pixel_values, grid, images = self._encode(messages)
        if len(ids) > self.max_context:
            raise ContextTooLong(f"context of {len(ids)} tokens exceeds {self.max_context}")
        return GenRequest(ids, pixel_values, grid, images)

    def _turn(self, req: GenRequest, response: list[int]) -> TurnSample:
        text = self.policy.tokenizer.decode(response, skip_special_tokens=True)
        return TurnSample(req.prompt_ids, response, text, req.pixel_values, req.image_grid_thw)

    def sample(self, messages: Sequence[Message]) -> TurnSample:
        req = self.request(messages)
        return self._turn(req, self.engine.generate([req])[0])

    async def sample_async(self, messages: Sequence[Message]) -> TurnSample:
        req = self.request(messages)
        return self._turn(req, await self.batcher.submit(req))


class RoundBatcher:
    """Collects the generation requests of concurrently running episodes into one engine call per round.

    A round is flushed as soon as every live episode is waiting on it (the usual case: the episodes of an RL step
    only wait on the policy), or `max_wait_s` after its first request, so an episode that waits on something else
    (a tool, a server) never holds the others back for long. The engine call blocks the event loop on purpose:
    everything else is waiting for it anyway.
    """

    def __init__(self, generate: Callable[[list[GenRequest]], list[list[int]]], max_wait_s: float = 0.05) -> None:
        self.generate = generate
        self.max_wait_s = max_wait_s
        self.live = 0
        self.rounds: list[int] = []  # requests per engine call, in order
        self._pending: list[tuple[GenRequest, asyncio.Future[list[int]]]] = []
        self._timer: asyncio.TimerHandle | None = None

    def open(self, n: int = 1) -> None:
        """`n` more episodes will submit requests (register a step's episodes before any of them starts, so the
        first one does not take a round of its own)."""
        self.live += n

    def close(self) -> None:
        """One episode is over: the others may be all that a round still waits for."""
        self.live -= 1
        self._check()

    @contextlib.asynccontextmanager
    async def episode(self) -> AsyncIterator[None]:
        self.open()
        try:
            yield
        finally:
            self.close()

    async def submit(self, req: GenRequest) -> list[int]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[int]] = loop.create_future()
        self._pending.append((req, fut))
        # checked on the next loop iteration: episodes that are ready to run submit theirs first
        loop.call_soon(self._check)
        if self._timer is None:
            self._timer = loop.call_later(self.max_wait_s, self._flush)
        return await fut

    def _check(self) -> None:
        if self._pending and len(self._pending) >= max(self.live, 1):
            self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.rounds.append(len(batch))
        try:
            outs = self.generate([r for r, _ in batch])
        except Exception as err:  # every waiting episode sees the failure
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(err)
            return
        for (_, fut), out in zip(batch, outs, strict=True):
            if not fut.done():
                fut.set_result(out)


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
