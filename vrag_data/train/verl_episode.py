"""The project's episode loop with an outside token generator as the policy, kept as one token stream.

verl trains one sequence per trajectory: prompt ids, then response ids in which the policy's own tokens carry
mask 1 and everything else (observations, tool output, the chat markers around them) mask 0. This module runs
`vrag_data.synth.episode.run_episode` unchanged (recipe prompts, grammar, context policy, environment, forced
answer, budgets) and only swaps the responder: every call of a trained role goes to `generate` (verl's server
manager in `verl_loop`, any async callable in tests) with token ids in and token ids out.

Contexts are encoded exactly as the bundled trainer encodes them (`rollout.PolicySampler.encode_context`: Qwen2-VL
chat layout, one `<|image_pad|>` per merged patch). The first call's ids are the prompt; every later call sends
the stream so far (token in, token out: the generated ids are never re-tokenized) plus the new messages' tokens,
cut from the re-rendered context after the previous reply, so they are the same tokens the bundled trainer's
next context ends with. A context policy that rewrites the history (VISOR's evidence window) cannot be one token
stream: `on_rewrite` says what happens, "error" (stop with one line) or "last_segment" (the stream restarts at
the rewritten context; only the turns after the last rewrite carry loss, recorded in `segments`).

No verl import here: the library's tests run without verl.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image

from vrag_data.errors import VragError
from vrag_data.rewards.episode import episode_from_trajectory
from vrag_data.schema.records import ImageRef, Message, Trajectory
from vrag_data.synth.episode import Reply, Responder
from vrag_data.teacher.pool import TeacherError
from vrag_data.train.data import expand_image_tags, generation_prompt, image_inputs
from vrag_data.train.rollout import messages_to_chat
from vrag_data.train.tiny import IM_END

# (prompt ids, images of those ids in order, max new tokens) -> (generated ids, their log-probs or None)
GenerateFn = Callable[[list[int], list[Image.Image], int], Awaitable[tuple[list[int], list[float] | None]]]
OnRewrite = Literal["error", "last_segment"]


@dataclass
class Encoded:
    text: str  # the context text with image placeholders expanded (ends with the assistant header)
    ids: list[int]
    images: list[Image.Image]
    keys: list[str]  # one identity per image, to tell that a later context shows the same images first


class ContextEncoder:
    """Messages -> the ids the bundled trainer's sampler builds for them; page images rendered and measured once."""

    def __init__(self, tokenizer: Any, image_processor: Any, load_image: Callable[[ImageRef], Image.Image],
                 default_system: str | None) -> None:
        self.tokenizer, self.image_processor = tokenizer, image_processor
        self.load_image, self.default_system = load_image, default_system
        self.merge = int(getattr(image_processor, "merge_size", 2))
        self._cache: dict[str, tuple[Image.Image, list[int]]] = {}

    def _image(self, ref: ImageRef) -> tuple[str, Image.Image, list[int]]:
        key = json.dumps(ref.model_dump(mode="json"), sort_keys=True)
        if key not in self._cache:
            im = self.load_image(ref)
            _, grid = image_inputs([im], self.image_processor)
            self._cache[key] = (im, [int(x) for x in grid[0].tolist()])
        im, grid = self._cache[key]
        return key, im, grid

    def encode(self, messages: Sequence[Message]) -> Encoded:
        chat, refs = messages_to_chat(messages)
        shown = [self._image(r) for r in refs]
        text = expand_image_tags(generation_prompt(chat, self.default_system), [g for _, _, g in shown], self.merge)
        return Encoded(text, self.tokenize(text), [im for _, im, _ in shown], [k for k, _, _ in shown])

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class TokenStream:
    """One trajectory as verl trains it. `calls` keeps (bundled-style context ids, generated ids) per trained call."""

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    images: list[Image.Image] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    segments: int = 0  # 1 = the whole trajectory is one stream; more = restarts at rewritten contexts
    calls: list[tuple[list[int], list[int]]] = field(default_factory=list)
    generate_s: float = 0.0
    _context_text: str = ""
    _reply: str = ""
    _ended: bool = False  # the last reply closed its turn with <|im_end|>

    def restart(self, enc: Encoded) -> None:
        self.prompt_ids, self.images, self.keys = list(enc.ids), list(enc.images), list(enc.keys)
        self.response_ids, self.response_mask, self.logprobs = [], [], []
        self.segments += 1


class StreamResponder(Responder):
    """Answers every role through `generate`; calls of `train_roles` build the token stream."""

    def __init__(self, encoder: ContextEncoder, generate: GenerateFn, *, max_new_tokens: int, prompt_length: int,
                 response_length: int, on_rewrite: OnRewrite = "error", train_roles: Sequence[str] = ("policy",)) -> None:
        super().__init__(None, None, None)
        self.encoder, self.generate = encoder, generate
        self.max_new_tokens, self.prompt_length, self.response_length = max_new_tokens, prompt_length, response_length
        self.on_rewrite, self.train_roles = on_rewrite, set(train_roles)
        self.im_end = int(encoder.tokenizer.convert_tokens_to_ids(IM_END))
        self.stream = TokenStream()

    def kind(self, role: str) -> str:
        return "policy-model"

    def _delta(self, enc: Encoded) -> list[int] | None:
        """Tokens the new context adds after the previous reply, or None when it does not extend the stream."""
        s = self.stream
        anchor = s._context_text + s._reply
        if not enc.text.startswith(anchor + IM_END) or enc.keys[: len(s.keys)] != s.keys:
            return None
        # the rest starts with <|im_end|>, a special token, so it tokenizes the same alone as inside the whole text
        rest = self.encoder.tokenize(enc.text[len(anchor):])
        return rest[1:] if s._ended else rest  # a closed turn already holds its generated <|im_end|>

    def _fit_prompt(self, enc: Encoded) -> None:
        if len(enc.ids) > self.prompt_length:
            raise VragError(f"rollout prompt of {len(enc.ids)} tokens exceeds verl.prompt_length {self.prompt_length} "
                            "(data.max_prompt_length); raise it in the train config or lower the recipe's page pixels")

    async def ask(self, role: str, messages: list[Message], ep: Any, phase: str) -> Reply:
        enc = self.encoder.encode(messages)
        if role not in self.train_roles:  # a helper role answered by the policy: generated, never trained
            ids, _ = await self.generate(enc.ids, enc.images, self.max_new_tokens)
            text = self.encoder.tokenizer.decode(ids, skip_special_tokens=True)
            return Reply(text, prompt_tokens=len(enc.ids), completion_tokens=len(ids))
        s = self.stream
        if not s.segments:
            self._fit_prompt(enc)
            s.restart(enc)
        else:
            delta = self._delta(enc)
            if delta is None and self.on_rewrite == "error":
                raise VragError(f"recipe {ep.recipe.name}: the context of its {phase} call rewrites the history (a context "
                                "policy or a phase with its own prompt), which verl cannot train as one token stream; set "
                                "verl.on_rewrite: last_segment (loss on the turns after the last rewrite) or train this "
                                "recipe with the bundled trainer")
            if delta is None:
                self._fit_prompt(enc)
                s.restart(enc)
            elif len(s.response_ids) + len(delta) >= self.response_length:
                # like the bundled trainer's ContextTooLong: the episode ends with status "error"
                raise TeacherError(f"episode reached verl.response_length {self.response_length} tokens")
            else:
                s.response_ids += delta
                s.response_mask += [0] * len(delta)
                if s.logprobs is not None:
                    s.logprobs += [0.0] * len(delta)
                s.images += enc.images[len(s.keys):]
                s.keys = list(enc.keys)
        budget = min(self.max_new_tokens, self.response_length - len(s.response_ids))
        t0 = time.perf_counter()
        ids, logprobs = await self.generate(s.prompt_ids + s.response_ids, list(s.images), budget)
        s.generate_s += time.perf_counter() - t0
        ids = list(ids)[:budget]
        if self.im_end in ids:  # keep the closing <|im_end|>: the policy must learn to stop
            ids = ids[: ids.index(self.im_end) + 1]
        s.calls.append((list(enc.ids), list(ids)))
        s.response_ids += ids
        s.response_mask += [1] * len(ids)
        s.logprobs = None if logprobs is None or s.logprobs is None else s.logprobs + list(logprobs)[: len(ids)]
        text = self.encoder.tokenizer.decode(ids, skip_special_tokens=True)
        s._context_text, s._reply, s._ended = enc.text, text, bool(ids) and ids[-1] == self.im_end
        return Reply(text, prompt_tokens=len(enc.ids), completion_tokens=len(ids))


def reward_fields(traj: Trajectory) -> dict[str, Any]:
    """The `extra_info` rollout keys `vrag_data.rewards.verl.compute_score` reads (see its docstring): what the
    agent saw and did, so the shipped reward scores the trajectory as `score_trajectory` does in the bundled trainer.
    Every key is written, empty when the agent did not search, select or read (a reward refuses a row lacking one),
    with the coordinate space the policy wrote its boxes in (the export's `coord_space` of the same row)."""
    ep = episode_from_trajectory(traj)
    space = traj.extra.get("coord_space")
    return {
        **({"coord_space": str(space)} if space else {}),
        "retrieved_pages": list(ep.retrieved),
        "search_results": [list(r) for r in ep.search_results],
        "selections": [{"candidates": list(c), "selected": list(s)} for c, s in ep.selections],
        "crops": [{"page_id": p, "box": list(b)} for p, b in ep.crops],
        "read_pages": list(ep.read_pages),
        "shown_pages": list(ep.shown_pages),
        "assistant_turns": list(ep.texts),
        "final_answer": traj.final_answer,
        "status": traj.status,
    }
