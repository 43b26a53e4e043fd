"""Generation engines behind one interface: token ids (+ images) in, response token ids out.

`HfEngine` runs the policy's own `generate` on a left-padded batch; `VllmEngine` a colocated vLLM whose weights are
synced from the policy after every update. `rl.rollout.engine` names one; a missing vLLM stops the run with one
line (it is never replaced by the HF engine behind the user's back). Each response ends at the first stop token,
which is kept (the policy must learn to stop), exactly as one sequence at a time would give it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from vrag_data.errors import VragError


@dataclass
class GenRequest:
    prompt_ids: list[int]
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None
    images: list[Any] = field(default_factory=list)  # the PIL images, for engines that run their own processor


class Engine(Protocol):
    calls: int  # generate calls made so far

    def generate(self, requests: Sequence[GenRequest]) -> list[list[int]]: ...

    def sync_weights(self, model: Any) -> None: ...


def cut_at_stop(tokens: Sequence[int], eos: int) -> list[int]:
    """Tokens up to and including the first `eos` (padding after a finished sequence goes)."""
    out = list(tokens)
    return out[: out.index(eos) + 1] if eos in out else out


class HfEngine:
    """The policy's `generate`, one call per batch of up to `max_batch_size` left-padded sequences."""

    def __init__(self, policy: Any, max_new_tokens: int, temperature: float, top_p: float,
                 max_batch_size: int = 64) -> None:
        self.policy = policy
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.max_batch_size = max(1, max_batch_size)
        self.calls = 0  # generate calls made (what batching saves)

    def sync_weights(self, model: Any) -> None:  # generates with the trained model itself
        return None

    @torch.no_grad()
    def generate(self, requests: Sequence[GenRequest]) -> list[list[int]]:
        out: list[list[int]] = []
        for i in range(0, len(requests), self.max_batch_size):
            out.extend(self._generate(requests[i : i + self.max_batch_size]))
        return out

    def _generate(self, reqs: Sequence[GenRequest]) -> list[list[int]]:
        model, pol = self.policy.model, self.policy
        width = max(len(r.prompt_ids) for r in reqs)
        ids = torch.full((len(reqs), width), pol.pad_id, dtype=torch.long)
        mask = torch.zeros((len(reqs), width), dtype=torch.long)
        for i, r in enumerate(reqs):  # left padding: every prompt ends where generation starts
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        ids, mask = ids.to(model.device), mask.to(model.device)
        eos = pol.tokenizer.eos_token_id
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "max_new_tokens": self.max_new_tokens,
                                  "do_sample": self.temperature > 0, "pad_token_id": pol.pad_id,
                                  "eos_token_id": eos}
        if self.temperature > 0:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        pix = [r.pixel_values for r in reqs if r.pixel_values is not None]
        if pix:
            kwargs.update(pixel_values=torch.cat(pix).to(model.device, model.dtype),
                          image_grid_thw=torch.cat([r.image_grid_thw for r in reqs if r.image_grid_thw is not None])
                          .to(model.device),
                          mm_token_type_ids=(ids == pol.image_token_id).long() * mask)
        was_training = model.training
        model.eval()
        try:
            with pol.autocast():
                gen = model.generate(**kwargs)
        finally:
            model.train(was_training)
        self.calls += 1
        return [cut_at_stop(gen[i, width:].tolist(), eos) for i in range(len(reqs))]


class VllmEngine:
    """A vLLM engine in this process (colocated with the trainer), fed our token ids and the images.

    The prompt ids already hold one `<|image_pad|>` per merged patch; vLLM's Qwen2-VL processor sees the expanded
    placeholders and uses the images as they are (same pixel budget, same grid). Weights: the trained policy's state
    dict is loaded into vLLM's model after every optimiser step (`sync_weights`)."""

    def __init__(self, model_dir: Path, policy: Any, max_new_tokens: int, temperature: float, top_p: float,
                 gpu_memory_utilization: float, max_model_len: int, min_pixels: int, max_pixels: int,
                 seed: int = 0) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in this process: weights reachable
        from vllm import LLM, SamplingParams

        self.eos = policy.tokenizer.eos_token_id
        self.llm = LLM(model=str(model_dir), dtype="bfloat16", gpu_memory_utilization=gpu_memory_utilization,
                       max_model_len=max_model_len, enable_prefix_caching=True, seed=seed,
                       mm_processor_kwargs={"min_pixels": min_pixels, "max_pixels": max_pixels})
        self.calls = 0
        self.params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                     stop_token_ids=[self.eos], skip_special_tokens=False, seed=seed)

    def generate(self, requests: Sequence[GenRequest]) -> list[list[int]]:
        prompts = [{"prompt_token_ids": list(r.prompt_ids), **({"multi_modal_data": {"image": r.images}} if r.images else {})}
                   for r in requests]
        outs = self.llm.generate(prompts, self.params, use_tqdm=False)
        self.calls += 1
        return [cut_at_stop(o.outputs[0].token_ids, self.eos) for o in outs]

    def sync_weights(self, model: Any) -> None:
        try:
            target = self.llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        except AttributeError:
            try:
                target = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
            except AttributeError:
                raise VragError("rl.rollout.engine vllm: this vLLM version does not expose its model in-process "
                                "(set VLLM_ENABLE_V1_MULTIPROCESSING=0) ; use rl.rollout.engine: hf") from None
        target.load_weights((k, v.detach().to(torch.bfloat16)) for k, v in model.state_dict().items())


def make_engine(kind: str, policy: Any, *, max_new_tokens: int, temperature: float, top_p: float,
                max_batch_size: int, model_dir: Path | None = None, **vllm_kwargs: Any) -> Engine:
    """`kind` = rl.rollout.engine. vLLM needs the policy saved as a model folder (`model_dir`)."""
    if kind == "hf":
        return HfEngine(policy, max_new_tokens, temperature, top_p, max_batch_size)
    if kind == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise VragError("rl.rollout.engine: vllm is not installed; `pip install vllm` on the GPU machine or set "
                            "rl.rollout.engine: hf") from None
        if model_dir is None:
            raise VragError("rl.rollout.engine vllm: needs the policy as a model folder; set model.path")
        return VllmEngine(model_dir, policy, max_new_tokens, temperature, top_p, **vllm_kwargs)
    raise VragError(f"rl.rollout.engine: unknown engine {kind!r}; use hf or vllm")
