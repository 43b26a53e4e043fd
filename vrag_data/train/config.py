"""Trainer settings: one YAML file (`configs/train/*.yaml`) validated with `extra="forbid"`.

Kept apart from `RunConfig` because a training run is configured by the model and its GPUs, not by the
data pipeline; the CLI flags `--data`, `--estimator`, `--max-steps` and `--output` override fields here, and
`--set key.sub=value` any other one (`--set model.path=out/sft/final` starts RL from an SFT output).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vrag_data.config import ConfigError, RoleConfig, apply_overrides
from vrag_data.yamlio import read_yaml_mapping

Estimator = Literal["grpo", "rs_grpo", "spo"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TinyModelConfig(_Section):
    """A Qwen2-VL-shaped model small enough for CPU tests; weights are random, nothing is downloaded."""

    vocab_size: int = 640  # target size of the locally trained byte-level BPE tokenizer
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vision_depth: int = 1
    vision_embed_dim: int = 32
    vision_num_heads: int = 2
    max_position_embeddings: int = 4096
    seed: int = 0


class ModelConfig(_Section):
    path: str | None = None  # a local pretrained Qwen2-VL / Qwen2.5-VL folder (AutoModelForImageTextToText)
    tiny: TinyModelConfig | None = None  # used when `path` is not set
    # the model family's box convention: Qwen2/2.5-VL write pixels of the resized image, Qwen3-VL 0-1000; RL
    # rollouts tell the policy this convention and read its boxes in it
    coord_space: Literal["qwen2.5-vl", "qwen3-vl"] = "qwen2.5-vl"
    min_pixels: int = 56 * 56
    max_pixels: int = 112 * 112  # VRAG-RL trains at 401408, UniDoc-RL at 200704
    # compute dtype: the frozen parts are stored in it and matmuls run in it under autocast; the trainable
    # parameters and the optimizer state stay fp32 ("master weights"): a bf16 weight above ~0.003 cannot take an
    # update of lr x ~1 at lr 1e-5, so a bf16-stored policy barely learns
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    pure_bf16: bool = False  # store the trainable weights and AdamW's states in bf16 too (less memory, lost updates)
    freeze_vision_tower: bool = True
    freeze_projector: bool = True
    freeze_language_model: bool = False
    gradient_checkpointing: bool = False  # language-model layers only: a frozen vision tower runs once, without grad
    attn_implementation: str | None = None  # e.g. "flash_attention_2" / "sdpa" / "flex_attention" on GPUs

    @model_validator(mode="after")
    def _pure_needs_bf16(self) -> ModelConfig:
        if self.pure_bf16 and self.dtype != "bfloat16":
            raise ValueError(f"pure_bf16 needs dtype bfloat16 (got {self.dtype}); set model.dtype: bfloat16 or drop pure_bf16")
        return self


class DataConfig(_Section):
    path: str | None = None  # SFT: an export (LLaMA-Factory folder, HF dataset, json/jsonl/parquet of SftRecord)
    cutoff_len: int = 2048
    max_samples: int | None = None
    default_system: str | None = "You are a helpful assistant."  # added when a record has no system turn


class SftConfig(_Section):
    epochs: float = 3.0
    max_steps: int = -1  # > 0 overrides epochs
    per_device_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1.0e-5
    lr_scheduler: str = "cosine"
    # the Trainer's optimizer (`adamw_torch`, `adamw_torch_fused`, `adamw_8bit` / `paged_adamw_8bit` with bitsandbytes)
    optim: str = "adamw_torch"
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    bf16: bool = False  # bf16 autocast over fp32 weights; implied by model.dtype bfloat16
    logging_steps: int = 1
    # a resumable checkpoint (weights as trained + optimizer state) every `save_steps` steps (0: none); the end of
    # training writes only the final model (`final_dtype`) unless `checkpoint_at_end` asks for one more
    save_steps: int = Field(500, ge=0)
    save_total_limit: int | None = 2
    checkpoint_at_end: bool = False
    seed: int = 0
    dataloader_workers: int = 0
    # several records per row with attention kept inside each record (per-record position ids: varlen kernels
    # under flash attention, a block-diagonal mask under sdpa/eager), as LLaMA-Factory's neat_packing
    packing: bool = False
    packing_len: int | None = None  # tokens per packed row; None = data.cutoff_len
    group_by_length: bool = False  # unpacked batches of similar length (less padding)
    peak_tflops: float | None = None  # the GPU's dense bf16 peak for the logged MFU; None = looked up by name
    # the loss over labelled tokens only, `loss_chunk_tokens` at a time: never the [tokens x vocab] fp32 logits
    # (`vrag_data.train.chunked_loss`; off under FSDP, whose sharded head is not read outside its forward)
    chunked_loss: bool = True
    loss_chunk_tokens: int = Field(4096, ge=1, le=1_048_576)
    # a frozen vision tower + projector run once per page image: their features are kept (host memory, this many GiB,
    # least recently used out) and reused by later records and epochs that show the same page
    tower_cache_gib: float = Field(4.0, ge=0.0, le=1024.0)


class RolloutConfig(_Section):
    # "hf": the policy's own `generate`; "vllm": a colocated vLLM engine with the weights synced after each update
    # (needs `vllm` installed: a missing engine stops the run, it is never swapped for another)
    engine: Literal["hf", "vllm"] = "hf"
    # the episodes of a step (tasks x group) run together and each decoding round is one batched generate call;
    # False = one episode and one sequence at a time (the reference the batched path is tested against)
    concurrent: bool = True
    max_batch_size: int = 64  # sequences per generate call (bounds the KV cache)
    vllm_gpu_memory_utilization: float = 0.3  # vLLM's share of the GPU beside the trainer


class RlConfig(_Section):
    estimator: Estimator = "grpo"
    recipe: str | None = None  # registered recipe to roll out: action grammar, prompts, context policy, reward spec
    group_size: int = 5  # trajectories per task (VRAG-RL / UniDoc-RL: 5)
    tasks_per_step: int = 2
    max_steps: int = 10
    # the policy's free turns per rollout, the one meaning of `max_turns` (`vrag_data.recipe.TURN_BUDGET_RULE`); unset:
    # the recipe's own budget, the one its synthesis ran under and its export records (summary.json `max_turns`)
    max_turns: int | None = Field(None, ge=1, le=64)
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    learning_rate: float = 1.0e-6
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0
    kl_coef: float = 0.01  # 0 disables the reference model
    clip_low: float = 0.2  # DAPO: separate lower / upper clip range
    clip_high: float = 0.28
    updates_per_step: int = 1  # optimisation passes over one rollout batch
    micro_batch_size: int = 4
    scale_std: bool = True  # GRPO divides by the group std; False = mean-centred only
    # RS-GRPO: {scope (a tag of the grammar, or "other"): reward components that supervise its tokens};
    # None = the recipe's reward spec (its `RewardSpec.scopes`)
    scopes: dict[str, list[str]] | None = None
    rs_mode: Literal["scope", "component"] = "scope"
    # SPO trajectory embedder, named explicitly: "module:factory" (the paper uses a dense encoder, BGE-M3) or
    # "hashed-bow" (an offline hashed bag of words, a stand-in); required when estimator is spo
    embedder: str | None = None
    # answer reward: the judge role (an OpenAI-compatible endpoint: `{endpoints: [{base_url, model}]}`) or "rules"
    # (the rule scorers, asked for explicitly); required for RL, there is no silent default
    judge: RoleConfig | Literal["rules"] | None = None
    seed: int = 0
    # a resumable checkpoint (weights as trained + optimizer state) every `save_steps` steps and at the end; 0 = none,
    # only the final model
    save_steps: int = 0
    save_total_limit: int | None = 2  # the newest resumable checkpoints kept (None: all)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)


class VerlConfig(_Section):
    """`vrag-data train rl --engine verl`: how verl lays the run out (read by `vrag_data.train.verl_config`)."""

    nnodes: int = 1
    n_gpus_per_node: int = 8
    rollout_engine: Literal["vllm", "sglang"] = "vllm"
    tensor_parallel: int = 1  # rollout engine's tensor parallel size per replica
    gpu_memory_utilization: float = 0.6
    prompt_length: int = 8192  # first context of an episode, images included (verl: data.max_prompt_length)
    response_length: int = 8192  # every later token of an episode: replies + observations (data.max_response_length)
    micro_batch_size_per_gpu: int = 1
    param_offload: bool = False  # FSDP: parameters / optimizer state on the CPU between uses
    optimizer_offload: bool = False
    agent_workers: int = 8  # verl's agent loop workers (episodes run concurrently inside each)
    # a context policy that rewrites the history (VISOR) is not one token stream: "error" stops, "last_segment"
    # trains the turns after the last rewrite (see vrag_data/train/verl_episode.py)
    on_rewrite: Literal["error", "last_segment"] = "error"
    overrides: dict[str, Any] = Field(default_factory=dict)  # dotted verl keys set last, e.g. trainer.logger


class TrainConfig(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    sft: SftConfig = Field(default_factory=SftConfig)
    rl: RlConfig = Field(default_factory=RlConfig)
    verl: VerlConfig = Field(default_factory=VerlConfig)
    output_dir: str = "train-out"
    workspace: str | None = None  # RL: the environment's corpus, tasks and index
    # the final model (`<output_dir>/final`, what a user loads): safetensors in this type; resumable checkpoints keep
    # the weights as trained and the optimizer state
    final_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


def parse_train_config(data: dict[str, Any], source: str = "<config>") -> TrainConfig:
    try:
        return TrainConfig.model_validate(data or {})
    except ValidationError as err:
        parts = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in err.errors()]
        raise ConfigError(f"{source}: invalid train config: " + "; ".join(parts)) from None


def load_train_config(path: str | Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """The train config in `path` with `--set key=value` overrides (e.g. `model.path=out/sft/final`) applied before
    validation."""
    if path is None and not overrides:
        return TrainConfig()
    data = read_yaml_mapping(path, "train config", "configs/train/tiny-sft.yaml") if path is not None else {}
    source = str(path) if path is not None else "<defaults>"
    data = apply_overrides(data, overrides, source)
    return parse_train_config(data, f"{source} with --set {' '.join(overrides)}" if overrides else source)
