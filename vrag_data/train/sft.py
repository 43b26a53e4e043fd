"""Supervised fine-tuning on an SFT export with the transformers Trainer.

The Trainer brings what the papers' tables need (cosine schedule, warmup ratio, gradient accumulation, bf16,
checkpoints and resume) and runs unchanged under `accelerate launch` / `torchrun` for several GPUs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vrag_data.errors import VragError
from vrag_data.progress import as_lines, stage_progress
from vrag_data.train.config import TrainConfig
from vrag_data.train.data import IMAGE_TAG, SftDataset, collate, load_sft_examples
from vrag_data.train.model import describe_attention, load_policy
from vrag_data.train.packing import PACKED_LENGTHS, PackedSftDataset, collate_packed, packed_position_ids
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
    tokens_per_s: float | None = None  # median over logging intervals after the first (warm-up) one
    mfu: float | None = None


DONE_FILE = "done.json"


def _done_key(cfg: TrainConfig) -> str:
    from vrag_data.ids import short_hash

    return short_hash(cfg.model_dump(mode="json", exclude={"output_dir"}), n=16)


def last_checkpoint(out: Path) -> Path | None:
    ckpts = [p for p in out.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(ckpts, key=lambda p: int(p.name.split("-")[-1])) if ckpts else None


def run_sft(cfg: TrainConfig, resume: bool = True, progress: bool = False) -> SftResult:
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    class _Losses(TrainerCallback):  # what this process trained (the restored history has the earlier steps)
        def __init__(self) -> None:
            self.losses: list[tuple[int, float]] = []

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "loss" in logs:
                self.losses.append((int(state.global_step), float(logs["loss"])))

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

    ckpt = last_checkpoint(out) if resume else None
    texts = [t.replace(IMAGE_TAG, " ") for ex in examples for _, t in ex.messages]
    # Resuming loads the weights with from_pretrained, which maps the saved key names back onto the model
    # (Trainer's own state-dict reload misses Qwen2-VL's renamed keys in transformers 5 and silently keeps
    # the fresh weights).
    s = cfg.sft
    policy = load_policy(cfg.model.model_copy(update={"path": str(ckpt)}) if ckpt else cfg.model, texts,
                         bf16_autocast=s.bf16)
    records = SftDataset(examples, policy.tokenizer, policy.image_processor, cfg.data.cutoff_len,
                         cfg.data.default_system)
    lengths = records.lengths() if s.packing or s.group_by_length else []
    dataset: Any = PackedSftDataset(records, lengths, s.packing_len or cfg.data.cutoff_len) if s.packing else records
    attention = describe_attention(policy.model, s.packing)
    note(f"train sft: precision {policy.precision.describe()}; {attention}")
    if s.packing:
        note(f"train sft: {len(records)} records packed into {len(dataset)} rows of <= "
             f"{s.packing_len or cfg.data.cutoff_len} tokens")
    import torch

    compute = policy.precision.compute
    lines = progress and as_lines()  # lines with rate and ETA instead of tqdm's bar (not a terminal, a flow's task)
    args = TrainingArguments(
        output_dir=str(out),
        num_train_epochs=s.epochs,
        max_steps=s.max_steps,
        per_device_train_batch_size=s.per_device_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        learning_rate=s.learning_rate,
        lr_scheduler_type=s.lr_scheduler,
        warmup_steps=s.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        weight_decay=s.weight_decay,
        max_grad_norm=s.max_grad_norm,
        bf16=compute == torch.bfloat16,  # autocast (accelerate's mixed precision) over the fp32 master weights
        fp16=compute == torch.float16 and not policy.precision.pure,
        logging_steps=s.logging_steps,
        save_steps=s.save_steps,
        save_total_limit=s.save_total_limit,
        seed=s.seed,
        data_seed=s.seed,
        dataloader_num_workers=s.dataloader_workers,
        dataloader_persistent_workers=s.dataloader_workers > 0,
        dataloader_pin_memory=_has_accelerator(),
        remove_unused_columns=False,
        ddp_find_unused_parameters=False,
        report_to=[],
        disable_tqdm=not progress or lines,
        use_cpu=not _has_accelerator(),
    )
    n_lm = language_model_params(policy.model)
    peak = peak_tflops(s.peak_tflops)
    pad_id = policy.pad_id

    class _Trainer(Trainer):
        tokens = 0  # real (non-pad) tokens since the last log line
        t_last: float | None = None
        rates: list[float] = []

        def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
            if model is not None:  # FSDP / SageMaker: the wrapped model needs the Trainer's own loader
                super()._load_from_checkpoint(resume_from_checkpoint, model)

        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            if s.group_by_length and not s.packing:
                from transformers.trainer_pt_utils import LengthGroupedSampler

                return LengthGroupedSampler(self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                            lengths=[min(n, cfg.data.cutoff_len) for n in lengths])
            return super()._get_train_sampler(train_dataset)

        def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            inputs = dict(inputs)
            packed = inputs.pop(PACKED_LENGTHS, None)
            if packed is not None:
                inputs["position_ids"] = packed_position_ids(self.model, inputs["input_ids"],
                                                             inputs["mm_token_type_ids"],
                                                             inputs.get("image_grid_thw"), packed)
                inputs["use_cache"] = False  # transformers reads packed position ids only without a KV cache
            if model.training:
                self.tokens += int((inputs["input_ids"] != pad_id).sum())
                if self.t_last is None:
                    self.t_last = time.perf_counter()
            return super().compute_loss(model, inputs, *args, **kwargs)

        def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
            if "loss" in logs and self.t_last is not None:
                now = time.perf_counter()  # the logged loss was read off the device: the step has finished
                rate = self.tokens / max(now - self.t_last, 1e-9)
                self.rates.append(rate)
                logs = {**logs, "tokens_per_s": round(rate, 1)}
                m = mfu(rate, n_lm, peak)
                if m is not None:
                    logs["mfu"] = round(m, 4)
                self.tokens, self.t_last = 0, now
            super().log(logs, *args, **kwargs)

    trainer = _Trainer(
        model=policy.model,
        args=args,
        train_dataset=dataset,
        data_collator=(lambda rows: collate_packed(rows, pad_id, policy.image_token_id)) if s.packing
        else (lambda batch: collate(batch, pad_id, policy.image_token_id)),
        processing_class=policy.tokenizer,
    )
    class _StepLines(TrainerCallback):
        def __init__(self, tick: Any) -> None:
            self.tick, self.loss = tick, ""

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "loss" in logs:
                self.loss = f"loss {float(logs['loss']):.4f}"
                if "tokens_per_s" in logs:
                    self.loss += f" {logs['tokens_per_s']:.0f} tok/s" + (f" MFU {logs['mfu']:.1%}" if "mfu" in logs else "")

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            if state.is_world_process_zero:
                self.tick(completed=state.global_step, total=state.max_steps, info=self.loss)

    class _SaveProcessor(TrainerCallback):  # checkpoints stay loadable as model folders (model.path)
        def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
            if state.is_world_process_zero:
                policy.image_processor.save_pretrained(out / f"checkpoint-{state.global_step}")

    seen = _Losses()
    trainer.add_callback(seen)
    trainer.add_callback(_SaveProcessor())
    if not progress or lines:
        trainer.remove_callback(PrinterCallback)
    with stage_progress("train sft (steps)", None, enabled=lines) as tick:
        trainer.add_callback(_StepLines(tick))
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    final = out / "final"
    if trainer.is_world_process_zero():
        policy.save(final)
        tmp = out / f".tmp-{DONE_FILE}"
        tmp.write_text(json.dumps({"config": _done_key(cfg), "global_step": int(trainer.state.global_step)}))
        tmp.replace(out / DONE_FILE)
    steady = trainer.rates[1:] or trainer.rates
    rate = sorted(steady)[len(steady) // 2] if steady else None
    return SftResult(out, int(trainer.state.global_step), seen.losses, len(examples), skipped,
                     str(ckpt) if ckpt else None, precision=policy.precision.describe(), attention=attention,
                     tokens_per_s=rate, mfu=mfu(rate, n_lm, peak) if rate else None)


def _has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())


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
