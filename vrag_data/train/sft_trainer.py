"""The transformers Trainer as SFT runs it: sealed checkpoints, packed rows, tokens/s and MFU in the logs, and the
callbacks that report progress. Imported only when a model is trained (it imports transformers)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback, TrainingArguments

from vrag_data.train.checkpoint import check_space, rotate, seal, staging_dir
from vrag_data.train.model import save_bytes
from vrag_data.train.chunked_loss import capture_head_input, chunked_causal_lm_loss
from vrag_data.train.config import SftConfig
from vrag_data.train.packing import PACKED_LENGTHS, packed_position_ids
from vrag_data.train.speed import mfu


def writer_pid() -> int:
    """Rank 0's pid on every rank (they all write into one temp folder, which rank 0 seals)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        box = [os.getpid()]
        dist.broadcast_object_list(box, src=0)
        return int(box[0])
    return os.getpid()


def has_accelerator() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def training_arguments(s: SftConfig, out: Path, policy: Any, progress: bool, lines: bool) -> TrainingArguments:
    """The Trainer's arguments from the SFT section: bf16/fp16 autocast over fp32 master weights unless pure."""
    import torch

    compute = policy.precision.compute
    return TrainingArguments(
        output_dir=str(out),
        num_train_epochs=s.epochs,
        max_steps=s.max_steps,
        per_device_train_batch_size=s.per_device_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        learning_rate=s.learning_rate,
        lr_scheduler_type=s.lr_scheduler,
        optim=s.optim,
        warmup_steps=s.warmup_ratio,  # transformers 5: a float < 1 is a ratio of the total steps
        weight_decay=s.weight_decay,
        max_grad_norm=s.max_grad_norm,
        bf16=compute == torch.bfloat16,  # autocast (accelerate's mixed precision) over the fp32 master weights
        fp16=compute == torch.float16 and not policy.precision.pure,
        logging_steps=s.logging_steps,
        save_strategy="steps" if s.save_steps else "no",
        save_steps=s.save_steps or 1,
        save_total_limit=s.save_total_limit,
        seed=s.seed,
        data_seed=s.seed,
        dataloader_num_workers=s.dataloader_workers,
        dataloader_persistent_workers=s.dataloader_workers > 0,
        dataloader_pin_memory=has_accelerator(),
        remove_unused_columns=False,
        ddp_find_unused_parameters=False,
        report_to=[],
        disable_tqdm=not progress or lines,
        use_cpu=not has_accelerator(),
    )


class SftTrainer(Trainer):
    """The Trainer with checkpoints written whole or not at all, packed rows' position ids, and real tokens/s.

    `out`: the run's folder; `image_processor`: saved into every checkpoint (each stays loadable as a model folder);
    `group_lengths`: record lengths for length-grouped batches (None: the Trainer's sampler); `pad_id`, `n_lm`
    (language-model parameters) and `peak` (the device's peak TFLOP/s, None when unknown) for tokens/s and MFU."""

    def __init__(self, *args: Any, out: Path, image_processor: Any, group_lengths: list[int] | None, pad_id: int,
                 n_lm: int, peak: float | None, chunk_tokens: int | None = None, checkpoint_at_end: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoint_at_end = checkpoint_at_end
        self.chunk_tokens = chunk_tokens  # None: the plain loss (the model's full logits)
        self.out, self.image_processor, self.group_lengths = out, image_processor, group_lengths
        self.pad_id, self.n_lm, self.peak = pad_id, n_lm, peak
        self.tokens = 0  # real (non-pad) tokens since the last log line
        self.t_last: float | None = None
        self.rates: list[float] = []
        self.staging: Path | None = None  # while a checkpoint is written: the temp folder the Trainer writes into
        self.writer: int | None = None

    def _get_output_dir(self, trial: Any) -> str:
        return str(self.staging) if self.staging is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        # The Trainer writes checkpoint-<step> under a temp folder; rank 0 adds the image processor, flushes it,
        # writes the marker and renames it into place.
        step = self.state.global_step
        if step >= self.state.max_steps and step % self.args.save_steps and not self.checkpoint_at_end:
            return  # the Trainer's save at the end of training: the final model alone, unless asked for
        if self.args.should_save:
            check_space(self.out, save_bytes(self.accelerator.unwrap_model(model), optimizer=True),
                        f"the resumable checkpoint of step {step}")
        if self.writer is None:
            self.writer = writer_pid()
        tmp = staging_dir(self.out, step, self.writer)
        self.staging = tmp
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.staging = None
        self.accelerator.wait_for_everyone()  # every rank's RNG state is in the folder
        if self.args.should_save:
            inner = tmp / f"checkpoint-{step}"
            self.image_processor.save_pretrained(inner)
            seal(inner, self.out / f"checkpoint-{step}", step)
            shutil.rmtree(tmp, ignore_errors=True)
            rotate(self.out, self.args.save_total_limit)
        self.accelerator.wait_for_everyone()

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        # the weights were loaded with from_pretrained (it maps Qwen2-VL's renamed keys back); FSDP / SageMaker's
        # wrapped model still needs the Trainer's own loader
        if model is not None:
            super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        if self.group_lengths is not None:
            from transformers.trainer_pt_utils import LengthGroupedSampler

            return LengthGroupedSampler(self.args.train_batch_size * self.args.gradient_accumulation_steps,
                                        lengths=self.group_lengths)
        return super()._get_train_sampler(train_dataset)

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        inputs = dict(inputs)
        packed = inputs.pop(PACKED_LENGTHS, None)
        if packed is not None:
            inputs["position_ids"] = packed_position_ids(self.model, inputs["input_ids"], inputs["mm_token_type_ids"],
                                                         inputs.get("image_grid_thw"), packed)
            inputs["use_cache"] = False  # transformers reads packed position ids only without a KV cache
        if model.training:
            self.tokens += int((inputs["input_ids"] != self.pad_id).sum())
            if self.t_last is None:
                self.t_last = time.perf_counter()
        if (self.chunk_tokens and "labels" in inputs and not return_outputs
                and self.label_smoother is None and self.compute_loss_func is None):
            return self._chunked_loss(model, inputs, num_items_in_batch)
        return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    def _chunked_loss(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any) -> Any:
        """The loss the Trainer's own path returns, without the full logits (`chunked_loss`): the model runs through
        its wrapper with the head's input caught, then the loss is reduced chunk by chunk; scaled as the Trainer
        scales a loss the model computed."""
        labels = inputs.pop("labels")
        head = self.accelerator.unwrap_model(model).lm_head
        with capture_head_input(head) as caught:
            model(**inputs)
        n = num_items_in_batch if self.model_accepts_loss_kwargs else None
        loss = chunked_causal_lm_loss(caught.hidden, head.weight, head.bias, labels, n, self.chunk_tokens)
        if self.args.average_tokens_across_devices and self.model_accepts_loss_kwargs and num_items_in_batch is not None:
            loss = loss * (self.accelerator.num_processes // self.get_tp_size() if self.args.n_gpu <= 1 else self.args.n_gpu)
        return loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs and self.t_last is not None:
            now = time.perf_counter()  # the logged loss was read off the device: the step has finished
            rate = self.tokens / max(now - self.t_last, 1e-9)
            self.rates.append(rate)
            logs = {**logs, "tokens_per_s": round(rate, 1)}
            m = mfu(rate, self.n_lm, self.peak)
            if m is not None:
                logs["mfu"] = round(m, 4)
            self.tokens, self.t_last = 0, now
        super().log(logs, *args, **kwargs)

    def median_rate(self) -> float | None:
        """Tokens/s: the median over logging intervals after the first (warm-up) one."""
        steady = self.rates[1:] or self.rates
        return sorted(steady)[len(steady) // 2] if steady else None


class LossHistory(TrainerCallback):
    """The losses this process logged (a resumed run's restored history holds the earlier steps)."""

    def __init__(self) -> None:
        self.losses: list[tuple[int, float]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001, ANN201 - transformers' signature
        if logs and "loss" in logs:
            self.losses.append((int(state.global_step), float(logs["loss"])))


class StepLines(TrainerCallback):
    """Each step moves a progress line; the last logged loss, tokens/s and MFU ride along."""

    def __init__(self, tick: Callable[..., None]) -> None:
        self.tick, self.loss = tick, ""

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001, ANN201
        if logs and "loss" in logs:
            self.loss = f"loss {float(logs['loss']):.4f}"
            if "tokens_per_s" in logs:
                self.loss += f" {logs['tokens_per_s']:.0f} tok/s" + (f" MFU {logs['mfu']:.1%}" if "mfu" in logs else "")

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        if state.is_world_process_zero:
            self.tick(completed=state.global_step, total=state.max_steps, info=self.loss)
