"""Supervised fine-tuning on an SFT export with the transformers Trainer.

The Trainer brings what the papers' tables need (cosine schedule, warmup ratio, gradient accumulation, bf16,
checkpoints and resume) and runs unchanged under `accelerate launch` / `torchrun` for several GPUs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vrag_data.errors import VragError
from vrag_data.progress import as_lines, stage_progress
from vrag_data.train.checkpoint import check_space, last_checkpoint
from vrag_data.train.config import TrainConfig
from vrag_data.train.data import IMAGE_TAG, SftDataset, collate, load_sft_examples
from vrag_data.train.model import describe_attention, load_policy, save_bytes
from vrag_data.train.tower_cache import enable_tower_cache
from vrag_data.train.varlen import choose_packed_attention
from vrag_data.train.packing import PackedSftDataset, collate_packed
from vrag_data.train.speed import language_model_params, mfu, note, peak_tflops


@dataclass
class SftResult:
    output_dir: Path
    global_step: int
    losses: list[tuple[int, float]]  # (step, training loss) logged by this run (not the resumed history)
    n_examples: int
    skipped: list[str] = field(default_factory=list)
    resumed_from: str | None = None
    nothing_to_do: bool = False  # the output already holds this config's finished model; nothing was changed
    precision: str = ""  # e.g. "fp32 master weights, bf16 autocast" or "pure bf16 (...)"
    attention: str = ""  # the attention kernels that ran
    tower_reused: int = 0  # page images whose frozen-tower features came from the cache
    tokens_per_s: float | None = None  # median over logging intervals after the first (warm-up) one
    mfu: float | None = None


DONE_FILE = "done.json"


def _done_key(cfg: TrainConfig) -> str:
    from vrag_data.ids import short_hash

    return short_hash(cfg.model_dump(mode="json", exclude={"output_dir"}), n=16)


@dataclass
class _Prepared:
    """What a run trains on, read and checked before any model is loaded."""
    examples: list[Any]
    skipped: list[str]
    out: Path
    checkpoint: Path | None


def run_sft(cfg: TrainConfig, resume: bool = True, progress: bool = False) -> SftResult:
    """Read the export, load the policy (from the newest sealed checkpoint when resuming), train, save `final/`."""
    prep = _prepare(cfg, resume)
    if isinstance(prep, SftResult):
        return prep
    from transformers.trainer_callback import PrinterCallback

    from vrag_data.train.sft_trainer import LossHistory, StepLines

    lines = progress and as_lines()  # lines with rate and ETA instead of tqdm's bar (not a terminal, a flow's task)
    trainer, policy, attention = _setup(cfg, prep, progress, lines)
    seen = LossHistory()
    trainer.add_callback(seen)
    if not progress or lines:
        trainer.remove_callback(PrinterCallback)
    with stage_progress("train sft (steps)", None, enabled=lines) as tick:
        trainer.add_callback(StepLines(tick))
        trainer.train(resume_from_checkpoint=str(prep.checkpoint) if prep.checkpoint else None)
    _save(cfg, prep.out, trainer, policy)
    if trainer.tower_cache is not None:
        note(f"train sft: {trainer.tower_cache.describe()}")
    rate = trainer.median_rate()
    return SftResult(prep.out, int(trainer.state.global_step), seen.losses, len(prep.examples), prep.skipped,
                     str(prep.checkpoint) if prep.checkpoint else None, precision=policy.precision.describe(),
                     attention=attention, tower_reused=trainer.tower_cache.hits if trainer.tower_cache else 0, tokens_per_s=rate, mfu=mfu(rate, trainer.n_lm, trainer.peak) if rate else None)


def _prepare(cfg: TrainConfig, resume: bool) -> _Prepared | SftResult:
    """The examples and the checkpoint to resume from; an `SftResult` when this config's model is already done."""
    if not cfg.data.path:
        raise VragError("no SFT data: set data.path in the train config or pass --data EXPORT")
    examples, skipped = load_sft_examples(cfg.data.path, cfg.data.max_samples)
    if not examples:
        raise VragError(f"{cfg.data.path}: no usable SFT records ({len(skipped)} skipped: "
                        f"{skipped[0] if skipped else 'empty'})")
    out = Path(cfg.output_dir)
    done = out / DONE_FILE
    if resume and done.is_file() and (out / "final").is_dir():
        rec = json.loads(done.read_text())
        if rec.get("config") == _done_key(cfg):  # finished with this very config: touch nothing
            return SftResult(out, int(rec.get("global_step", 0)), [], len(examples), skipped, None, nothing_to_do=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    if skipped:
        (out / "skipped.jsonl").write_text("".join(json.dumps({"reason": s}) + "\n" for s in skipped))
    ckpt = last_checkpoint(out, primary=os.environ.get("RANK", "0") == "0") if resume else None
    return _Prepared(examples, skipped, out, ckpt)


def _setup(cfg: TrainConfig, prep: _Prepared, progress: bool, lines: bool) -> tuple[Any, Any, str]:
    """The policy, its dataset (packed or not) and the Trainer; returns (trainer, policy, attention kernels)."""
    from vrag_data.train.sft_trainer import SftTrainer, training_arguments

    s = cfg.sft
    texts = [t.replace(IMAGE_TAG, " ") for ex in prep.examples for _, t in ex.messages]
    # Resuming loads the weights with from_pretrained, which maps the saved key names back onto the model
    # (Trainer's own state-dict reload misses Qwen2-VL's renamed keys in transformers 5 and silently keeps
    # the fresh weights).
    model_cfg = cfg.model.model_copy(update={"path": str(prep.checkpoint)}) if prep.checkpoint else cfg.model
    policy = load_policy(model_cfg, texts, bf16_autocast=s.bf16)
    records = SftDataset(prep.examples, policy.tokenizer, policy.image_processor, cfg.data.cutoff_len,
                         cfg.data.default_system)
    lengths = records.lengths() if s.packing or s.group_by_length else []
    dataset: Any = PackedSftDataset(records, lengths, s.packing_len or cfg.data.cutoff_len) if s.packing else records
    cache = enable_tower_cache(policy.model, int(s.tower_cache_gib * 2**30))
    if s.packing:  # records attend within themselves: flash-attn's varlen kernel, else per-record sdpa (no L x L mask)
        choose_packed_attention(policy.model, cfg.model.attn_implementation)
    attention = describe_attention(policy.model, s.packing)
    if s.packing:
        note(f"train sft: {len(records)} records packed into {len(dataset)} rows of <= "
             f"{s.packing_len or cfg.data.cutoff_len} tokens")
    pad_id, image_token = policy.pad_id, policy.image_token_id
    trainer = SftTrainer(
        model=policy.model,
        args=training_arguments(s, prep.out, policy, progress, lines),
        train_dataset=dataset,
        data_collator=(lambda rows: collate_packed(rows, pad_id, image_token)) if s.packing
        else (lambda batch: collate(batch, pad_id, image_token)),
        processing_class=policy.tokenizer,
        out=prep.out, image_processor=policy.image_processor,
        group_lengths=[min(n, cfg.data.cutoff_len) for n in lengths] if s.group_by_length and not s.packing else None,
        pad_id=pad_id, n_lm=language_model_params(policy.model), peak=peak_tflops(s.peak_tflops),
        chunk_tokens=s.loss_chunk_tokens if s.chunked_loss else None, checkpoint_at_end=s.checkpoint_at_end,
    )
    trainer.tower_cache = cache
    if trainer.is_fsdp_enabled:  # the sharded head is not read outside its forward: the full logits, said so below
        trainer.chunk_tokens = None
    loss = (f"loss: chunked, {s.loss_chunk_tokens} labelled tokens at a time" if trainer.chunk_tokens
            else "loss: full logits" + (" (FSDP)" if s.chunked_loss else ""))
    towers = "tower features: cached" if cache is not None else "tower features: computed every step (the tower trains)"
    note(f"train sft: precision {policy.precision.describe()}; {attention}; {loss}; {towers}")
    return trainer, policy, attention


def _save(cfg: TrainConfig, out: Path, trainer: Any, policy: Any) -> None:
    """Rank 0 saves `final/`, then the done marker that lets the same config's re-run touch nothing."""
    if trainer.is_world_process_zero():
        check_space(out, save_bytes(policy.model, cfg.final_dtype), "the final model")
        policy.save(out / "final", cfg.final_dtype)
        tmp = out / f".tmp-{DONE_FILE}"
        tmp.write_text(json.dumps({"config": _done_key(cfg), "global_step": int(trainer.state.global_step)}))
        tmp.replace(out / DONE_FILE)


def describe(result: SftResult) -> dict[str, Any]:
    return {
        "output_dir": str(result.output_dir),
        "global_step": result.global_step,
        "examples": result.n_examples,
        "skipped": len(result.skipped),
        "first_loss": result.losses[0][1] if result.losses else None,
        "last_loss": result.losses[-1][1] if result.losses else None,
        "resumed_from": result.resumed_from,
        "nothing_to_do": result.nothing_to_do,
        "precision": result.precision,
        "tokens_per_s": round(result.tokens_per_s, 1) if result.tokens_per_s else None,
        "mfu": round(result.mfu, 4) if result.mfu is not None else None,
    }
