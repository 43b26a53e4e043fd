"""Benchmark: the bundled trainer on one GPU at Qwen2.5-VL 3B / 7B shapes (random weights, nothing downloaded).

    python bench/bench_train_gpu.py [--shapes 3b,7b] [--records 256] [--data SFT_EXPORT] [--steps 8] [--keep]

On a CUDA GPU, per shape: SFT through `run_sft` (bf16 autocast over fp32 master weights, packed records, with and
without activation checkpointing; the attention the trainer picks: flash-attn's varlen kernel when installed, else
`vrag_varlen`, per-record sdpa with no L x L mask; the chunked loss; frozen-tower features cached) -> tokens/s, MFU,
peak memory and a step-time breakdown (vision tower, language-model forward, backward, optimizer, measured with CUDA
events on a second, shorter run); rollouts: generated tokens/s one sequence at a time vs one batched call (80
sequences), and vLLM when installed. The 7B shape also runs with an 8-bit paged AdamW when bitsandbytes is installed
(else the report says why it was not run). MFU counts 6 x the language model's parameters x tokens (the vision tower
and the attention scores are not counted). The data: `--records` page-size SFT records generated over a small
corpus (pages of 1190 x 1684 px hit the 401,408-pixel budget; several records show each page, as tasks share pages),
or `--data`. The tokenizer is the tiny trained one (its ids fit the real vocabulary; texts take more tokens than with
Qwen's), so tokens/s compare across runs of this bench. Everything it writes (models, data, outputs) is removed at
the end unless `--keep`.

Without a GPU it says so and runs the CPU correctness part: the precision, packing, varlen attention, chunked loss,
tower cache and checkpoint tests, then tiny-model figures (SFT tokens/s padded vs packed; rollouts sequential vs
batched).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

SHAPES = {  # Qwen2.5-VL-3B/7B-Instruct config.json values (text model, then the shared vision tower)
    "3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}
VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, patch_size=14, spatial_merge_size=2,
              temporal_patch_size=2, window_size=112, fullatt_block_indexes=[7, 15, 23, 31], in_chans=3)
MAX_PIXELS = 401408  # VRAG-RL's budget


def versions() -> str:
    import transformers

    v = f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}"
    try:
        import vllm

        v += f", vllm {vllm.__version__}"
    except ImportError:
        v += ", no vllm"
    try:
        import flash_attn

        v += f", flash-attn {flash_attn.__version__}"
    except ImportError:
        v += ", no flash-attn"
    return v


def page_records(work: Path, n: int, page: tuple[int, int] = (1190, 1684)) -> Path:
    """`n` SFT records (LLaMA-Factory layout) at page size: a search turn, the page, the answer; several records per
    page (the corpus has a few pages), each with its own question."""
    import json

    from PIL import Image

    from tests.support.train_workspace import QA, build_workspace

    ws, _ = build_workspace(work / "ws", size=page)
    out = work / "export"
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        q, a, pid, query = QA[i % len(QA)]
        name = f"images/{pid}.jpg"
        if not (out / name).is_file():
            Image.open(ws.page_image(pid)).save(out / name)
        rows.append({"messages": [
            {"role": "system", "content": "Use <search> to find pages and <answer> to answer."},
            {"role": "user", "content": f"Question {i}: {q} Answer from the report, with the figure as printed."},
            {"role": "assistant", "content": f"<think>I should search for it (record {i}).</think><search>{query}</search>"},
            {"role": "user", "content": "<image>\nHere is the page you found."},
            {"role": "assistant", "content": f"<think>The page states it plainly; record {i}.</think><answer>{a}</answer>"},
        ], "images": [name]})
    (out / "bench_sft.json").write_text(json.dumps(rows))
    (out / "dataset_info.json").write_text(json.dumps({"bench_sft": {
        "file_name": "bench_sft.json", "formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                 "system_tag": "system"}}}))
    return out


def random_model_folder(shape: str, out: Path) -> Path:
    """A Qwen2.5-VL model folder with random weights at `shape`, the tiny tokenizer and Qwen's image processor."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    from vrag_data.train.model import Policy
    from vrag_data.train.tiny import ENDOFTEXT, IM_END, IMAGE_PAD, SPECIAL_TOKENS, VIDEO_PAD, VISION_END, VISION_START
    from vrag_data.train.tiny import make_image_processor, train_tokenizer

    tok = train_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = dict(SHAPES[shape])
    tie = text.pop("tie_word_embeddings")
    cfg = Qwen2_5_VLConfig(
        text_config={**text, "max_position_embeddings": 128000, "rms_norm_eps": 1e-6,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
                     "bos_token_id": ids[ENDOFTEXT], "eos_token_id": ids[IM_END], "pad_token_id": ids[ENDOFTEXT]},
        vision_config={**VISION, "out_hidden_size": text["hidden_size"]},
        image_token_id=ids[IMAGE_PAD], video_token_id=ids[VIDEO_PAD], vision_start_token_id=ids[VISION_START],
        vision_end_token_id=ids[VISION_END], tie_word_embeddings=tie)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2_5_VLForConditionalGeneration(cfg).to(torch.bfloat16)
    model.generation_config.eos_token_id = ids[IM_END]
    model.generation_config.pad_token_id = ids[ENDOFTEXT]
    Policy(model, tok, make_image_processor(MAX_PIXELS // 2, MAX_PIXELS)).save(out)
    del model
    torch.cuda.empty_cache()
    return out


def bench_sft(folder: Path, data: Path, steps: int, attn: str | None, out: Path, packing: bool = True,
              checkpointing: bool = True, optim: str = "adamw_torch") -> dict:
    from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TrainConfig
    from vrag_data.train.sft import run_sft

    cfg = TrainConfig(
        model=ModelConfig(path=str(folder), dtype="bfloat16", min_pixels=MAX_PIXELS // 2, max_pixels=MAX_PIXELS,
                          gradient_checkpointing=checkpointing, attn_implementation=attn),
        data=DataConfig(path=str(data), cutoff_len=16384),
        sft=SftConfig(max_steps=steps, per_device_batch_size=1 if packing else 2, learning_rate=1e-5, optim=optim,
                      warmup_ratio=0.0, save_steps=0, packing=packing, packing_len=16384, dataloader_workers=2),
        output_dir=str(out))
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    r = run_sft(cfg, resume=False)
    row = {"packing": packing, "checkpointing": checkpointing, "optim": optim, "steps": r.global_step,
           "tokens_per_s": r.tokens_per_s, "mfu": r.mfu, "mfu_counts": "6 x language-model params x tokens",
           "precision": r.precision, "attention": r.attention, "tower_features_reused": r.tower_reused,
           "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1), "wall_s": round(time.perf_counter() - t0, 1)}
    shutil.rmtree(out, ignore_errors=True)  # the final model (GBs): not kept
    return row


class StepTimes:
    """CUDA-event times per step: vision tower, language model forward, backward, optimizer (a Trainer callback plus
    forward hooks; each interval is read after the step synchronises)."""

    def __init__(self, model) -> None:
        from transformers import TrainerCallback

        self.marks: dict[str, list] = {}
        self.totals: dict[str, float] = {}
        inner = getattr(model, "model", model)
        for name, mod in (("vision_tower", inner.visual), ("language_model", inner.language_model)):
            mod.register_forward_pre_hook(lambda m, a, n=name: self._mark(n + "_start"))
            mod.register_forward_hook(lambda m, a, o, n=name: self._mark(n + "_end"))
        times = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
                times.marks = {}
                times._mark("step_start")

            def on_pre_optimizer_step(self, args, state, control, **kw):  # noqa: ANN001, ANN201
                times._mark("optimizer_start")

            def on_optimizer_step(self, args, state, control, **kw):  # noqa: ANN001, ANN201
                times._mark("optimizer_end")

            def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
                times._mark("step_end")
                times._close()

        self.callback = Callback()

    def _mark(self, key: str) -> None:
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        self.marks.setdefault(key, []).append(e)

    def _close(self) -> None:
        torch.cuda.synchronize()
        m = self.marks

        def span(a: str, b: str) -> float:
            return sum(x.elapsed_time(y) for x, y in zip(m.get(a, []), m.get(b, []))) / 1000

        step = span("step_start", "step_end")
        parts = {"vision_tower": span("vision_tower_start", "vision_tower_end"),
                 "language_model_forward": span("language_model_start", "language_model_end"),
                 "optimizer": span("optimizer_start", "optimizer_end")}
        # the last forward's end to the optimizer: backward (and the loss); with checkpointing it repeats forwards
        fwd_end = m.get("language_model_end", [])
        if fwd_end and m.get("optimizer_start"):
            parts["backward"] = fwd_end[-1].elapsed_time(m["optimizer_start"][0]) / 1000
        parts["step"] = step
        for k, v in parts.items():
            self.totals[k] = self.totals.get(k, 0.0) + v


def bench_breakdown(folder: Path, data: Path, steps: int, attn: str | None, out: Path) -> dict:
    """Where a step's time goes (packed, checkpointing on), averaged over the steps after the first."""
    from vrag_data.train import sft as sft_mod
    from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TrainConfig

    cfg = TrainConfig(
        model=ModelConfig(path=str(folder), dtype="bfloat16", min_pixels=MAX_PIXELS // 2, max_pixels=MAX_PIXELS,
                          gradient_checkpointing=True, attn_implementation=attn),
        data=DataConfig(path=str(data), cutoff_len=16384),
        sft=SftConfig(max_steps=steps, per_device_batch_size=1, learning_rate=1e-5, warmup_ratio=0.0, save_steps=0,
                      packing=True, packing_len=16384), output_dir=str(out))
    prep = sft_mod._prepare(cfg, resume=False)
    trainer, _, _ = sft_mod._setup(cfg, prep, False, False)
    times = StepTimes(trainer.model)
    trainer.add_callback(times.callback)
    trainer.train()
    shutil.rmtree(out, ignore_errors=True)
    n = max(1, trainer.state.global_step)
    return {k: round(v / n, 3) for k, v in times.totals.items()} | {"unit": "seconds per step", "steps": n}


def bench_rollouts(folder: Path, n_seq: int, n_alone: int, new_tokens: int, attn: str | None) -> dict:
    from vrag_data.schema.records import Message
    from vrag_data.train.config import ModelConfig
    from vrag_data.train.engines import HfEngine
    from vrag_data.train.model import load_policy
    from vrag_data.train.rollout import PolicySampler

    pol = load_policy(ModelConfig(path=str(folder), dtype="bfloat16", min_pixels=MAX_PIXELS // 2,
                                  max_pixels=MAX_PIXELS, attn_implementation=attn))
    pol.model.cuda()
    sampler = PolicySampler(pol, lambda ref: None, new_tokens, 1.0, 1.0)
    # a text-only first turn (the VRAG-RL question prompt), varied so prompts differ in length
    reqs = [sampler.request([Message(role="user", text=f"Question {i}: " + "what was the revenue of Acme? " * (1 + i % 4))])
            for i in range(n_seq)]
    eng = HfEngine(pol, new_tokens, 1.0, 1.0, max_batch_size=n_seq)
    eng.generate(reqs[:2])  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    alone = sum(len(eng.generate([r])[0]) for r in reqs[:n_alone])
    torch.cuda.synchronize()
    seq = alone / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    batched = sum(len(x) for x in eng.generate(reqs))
    torch.cuda.synchronize()
    bat = batched / (time.perf_counter() - t0)
    res = {"sequences": n_seq, "new_tokens": new_tokens, "sequential_tokens_per_s": round(seq, 1),
           "batched_tokens_per_s": round(bat, 1), "speedup": round(bat / seq, 1)}
    del pol, sampler, eng
    torch.cuda.empty_cache()
    try:
        import vllm  # noqa: F401
    except ImportError:
        return res
    from vrag_data.train.engines import VllmEngine
    from vrag_data.train.model import load_policy as _lp

    tok_pol = _lp(ModelConfig(path=str(folder), dtype="bfloat16"))
    v = VllmEngine(folder, tok_pol, new_tokens, 1.0, 1.0, 0.5, 4096, MAX_PIXELS // 2, MAX_PIXELS)
    v.generate(reqs[:2])
    t0 = time.perf_counter()
    n = sum(len(x) for x in v.generate(reqs))
    res["vllm_tokens_per_s"] = round(n / (time.perf_counter() - t0), 1)
    return res


def cpu_part(out: Path) -> dict:
    print("no CUDA GPU: running the CPU correctness part (tests) and tiny-model figures", flush=True)
    tests = ["tests/train/test_train_precision.py", "tests/train/test_train_packing.py", "tests/train/test_train_batched_rollout.py",
             "tests/train/test_train_varlen.py", "tests/train/test_train_chunked_loss.py", "tests/train/test_train_tower_cache.py",
             "tests/train/test_train_checkpoints_fit.py"]
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=REPO)
    from tests.support.train_workspace import build_workspace, write_sft_export
    from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig
    from vrag_data.train.sft import run_sft

    ws, _ = build_workspace(out / "ws", size=(224, 168))
    write_sft_export(ws, out / "export", n=16)
    figs: dict = {"tests_rc": rc}
    for packing in (False, True):
        cfg = TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=224 * 224),
                          data=DataConfig(path=str(out / "export"), cutoff_len=2048),
                          sft=SftConfig(max_steps=6, per_device_batch_size=1 if packing else 4, learning_rate=1e-3,
                                        warmup_ratio=0.0, save_steps=10_000, packing=packing, packing_len=2048),
                          output_dir=str(out / f"sft-{packing}"))
        r = run_sft(cfg, resume=False)
        figs[f"sft_tokens_per_s_{'packed' if packing else 'padded'}"] = round(r.tokens_per_s or 0, 1)
    figs.update(cpu_rollouts(ws))
    return figs


def cpu_rollouts(ws) -> dict:
    from vrag_data.recipe import get_recipe
    from vrag_data.train.config import ModelConfig, TinyModelConfig
    from vrag_data.train.engines import HfEngine
    from vrag_data.train.episode import PolicyResponder, make_deps, rollout_step
    from vrag_data.train.model import load_policy
    from vrag_data.train.rl_env import RlEnvironment
    from vrag_data.train.rollout import PolicySampler

    env = RlEnvironment.open(str(ws.root), None)
    pol = load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112),
                      [t.question for t in env.tasks])
    recipe = get_recipe("vrag_rl").for_rl(2, 112 * 112, "qwen2.5-vl")
    res = {}
    for concurrent in (False, True):
        eng = HfEngine(pol, 32, 1.0, 1.0, max_batch_size=64 if concurrent else 1)
        sampler = PolicySampler(pol, env.image_loader(recipe.env.page_min_pixels, recipe.env.page_max_pixels,
                                                      recipe.env.page_resize), 32, 1.0, 1.0, engine=eng)
        responder = PolicyResponder(sampler, concurrent=concurrent)
        deps = make_deps(env, recipe, responder, "bench")
        t0 = time.perf_counter()
        eps = rollout_step(deps, responder, [(t, 5 * i) for i, t in enumerate(env.tasks)], 5)  # 4 tasks x group 5
        dt = time.perf_counter() - t0
        n = sum(len(s.response_ids) for ep in eps for s in ep.samples)
        res[f"rollout_{'batched' if concurrent else 'sequential'}"] = {
            "episodes": len(eps), "tokens": n, "generate_calls": eng.calls, "tokens_per_s": round(n / dt, 1)}
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="3b,7b")
    ap.add_argument("--data", default=None, help="an SFT export (default: --records page-size records generated)")
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep what the bench writes (models, data, outputs)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-train-gpu-"))
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"versions": versions(), "command": " ".join(sys.argv)}
    try:
        run(args, out, report)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(report, indent=1))


def run(args: argparse.Namespace, out: Path, report: dict) -> None:
    if not torch.cuda.is_available():
        report["device"] = f"CPU ({platform.machine()}), no CUDA GPU"
        report["cpu"] = cpu_part(out)
        return
    report["device"] = torch.cuda.get_device_name()
    from vrag_data.train.varlen import flash_attn_installed

    attn = "flash_attention_2" if flash_attn_installed() else None  # None: the trainer picks vrag_varlen for packing
    data = Path(args.data) if args.data else page_records(out / "data", args.records)
    for shape in [s for s in args.shapes.split(",") if s]:
        folder = random_model_folder(shape, out / f"model-{shape}")
        row: dict = {}
        runs = [("sft_packed_ckpt1", True, "adamw_torch"), ("sft_packed_ckpt0", False, "adamw_torch")]
        if shape == "7b":
            runs.append(("sft_packed_ckpt1_paged_adamw_8bit", True, "paged_adamw_8bit"))
        for key, ckpt, optim in runs:
            if optim != "adamw_torch" and importlib.util.find_spec("bitsandbytes") is None:
                row[key] = {"not_run": "bitsandbytes is not installed (the 8-bit paged AdamW needs it)"}
                continue
            try:
                row[key] = bench_sft(folder, data, args.steps, attn, out / f"sft-{shape}-{key}", True, ckpt, optim)
            except torch.cuda.OutOfMemoryError as err:  # 7B: fp32 masters + AdamW states + grads ~ 16 bytes a parameter
                row[key] = {"error": f"out of memory: {str(err)[:120]}"}
            torch.cuda.empty_cache()
            print(json.dumps({shape: row}), flush=True)
        try:
            row["step_breakdown"] = bench_breakdown(folder, data, min(args.steps, 4), attn, out / f"breakdown-{shape}")
        except Exception as err:  # noqa: BLE001 - the figures above stand; the report says what failed here
            row["step_breakdown"] = {"error": f"{type(err).__name__}: {str(err)[:160]}"}
        torch.cuda.empty_cache()
        row["rollouts"] = bench_rollouts(folder, 80, 8, args.new_tokens, attn)
        report[shape] = row
        shutil.rmtree(folder, ignore_errors=True)
        print(json.dumps({shape: row}), flush=True)


if __name__ == "__main__":
    main()
