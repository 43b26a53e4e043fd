"""Mixed precision: a bf16 config keeps fp32 master weights, so its updates land like fp32's; pure bf16 only on
request. On the tiny CPU model (weights at Qwen's 0.02 scale), CPU bf16 autocast."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.config import ConfigError
from vrag_data.train.config import DataConfig, ModelConfig, RlConfig, SftConfig, TinyModelConfig, TrainConfig
from vrag_data.train.config import load_train_config, parse_train_config
from vrag_data.train.data import IMAGE_TAG, load_sft_examples
from vrag_data.train.model import load_policy
from vrag_data.train.precision import changed_fraction, resolve_precision

REPO = Path(__file__).resolve().parents[2]


def _model(**kw) -> ModelConfig:
    return ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84, **kw)


def _sft(export: Path, out: Path, model: ModelConfig, lr: float, steps: int) -> TrainConfig:
    return TrainConfig(model=model, data=DataConfig(path=str(export), cutoff_len=1024),
                       sft=SftConfig(per_device_batch_size=4, learning_rate=lr, warmup_ratio=0.0, max_steps=steps,
                                     lr_scheduler="constant", save_steps=1000),
                       output_dir=str(out), final_dtype="float32")  # the weights as trained: what these tests measure


def _trainable_changed(export: Path, cfg: TrainConfig) -> float:
    """Share of the trainable weights that differ after the run (the tiny model is rebuilt identically, in the
    run's own dtypes: a bf16 config starts from the bf16-rounded weights)."""
    ex, _ = load_sft_examples(export)
    texts = [t.replace(IMAGE_TAG, " ") for e in ex for _, t in e.messages]
    start = load_policy(cfg.model, texts).model
    names = {n for n, p in start.named_parameters() if p.requires_grad}
    before = {n: p.detach() for n, p in start.named_parameters() if n in names}
    final = load_policy(ModelConfig(path=str(Path(cfg.output_dir) / "final"), min_pixels=56 * 56,
                                    max_pixels=84 * 84)).model
    return changed_fraction(before, {n: p.detach() for n, p in final.named_parameters() if n in names})


def test_policy_dtypes_follow_the_precision():
    fp32 = load_policy(_model())
    mixed = load_policy(_model(dtype="bfloat16"))
    pure = load_policy(_model(dtype="bfloat16", pure_bf16=True))
    assert fp32.precision.describe() == "fp32"
    assert mixed.precision.describe() == "fp32 master weights, bf16 autocast"
    assert pure.precision.describe().startswith("pure bf16")
    # trainable = fp32 master copy; the frozen vision tower stays in the compute dtype
    assert {p.dtype for p in mixed.model.parameters() if p.requires_grad} == {torch.float32}
    assert {p.dtype for p in mixed.model.model.visual.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in pure.model.parameters()} == {torch.bfloat16}
    with mixed.autocast():  # the matmuls run in bf16
        assert mixed.model.lm_head(torch.zeros(1, 64)).dtype == torch.bfloat16


def test_bf16_sft_moves_the_weights_fp32_moves(export, tmp_path):
    from vrag_data.train.sft import run_sft

    # lr 1e-5, 3 steps (the measurement): pure bf16 loses most updates, fp32 master weights keep them
    frac = {}
    for name, model in (("fp32", _model()), ("bf16", _model(dtype="bfloat16")),
                        ("pure", _model(dtype="bfloat16", pure_bf16=True))):
        cfg = _sft(export, tmp_path / name, model, lr=1e-5, steps=3)
        result = run_sft(cfg)
        assert result.global_step == 3
        frac[name] = _trainable_changed(export, cfg)
    assert frac["fp32"] > 0.5, frac
    assert abs(frac["bf16"] - frac["fp32"]) < 0.03, frac
    assert frac["pure"] < 0.5 * frac["fp32"], frac  # why pure bf16 is opt-in


def test_bf16_sft_loss_falls_like_fp32(export, tmp_path):
    from vrag_data.train.sft import run_sft

    curves = {}
    for name, model in (("fp32", _model()), ("bf16", _model(dtype="bfloat16"))):
        result = run_sft(_sft(export, tmp_path / name, model, lr=1e-2, steps=6))
        assert result.precision == ("fp32" if name == "fp32" else "fp32 master weights, bf16 autocast")
        curves[name] = [loss for _, loss in result.losses]
    for name, c in curves.items():
        assert c[-1] < 0.7 * c[0], (name, curves)
    # same data every step (one batch = all 4 records): the curves agree step by step within bf16 rounding
    for a, b in zip(curves["fp32"], curves["bf16"], strict=True):
        assert b == pytest.approx(a, rel=0.05), curves


def test_bf16_rl_update_moves_the_weights_fp32_moves():
    from tests.train.test_train_rl import _episode, _sample
    from vrag_data.train.update import training_rows, update_policy

    frac = {}
    for name, model in (("fp32", _model()), ("bf16", _model(dtype="bfloat16")),
                        ("pure", _model(dtype="bfloat16", pure_bf16=True))):
        pol = load_policy(model)
        good = _sample(pol, "Question: revenue?", "<answer>18</answer>")
        bad = _sample(pol, "Question: revenue?", "<search>zebra</search>")
        rows = training_rows([_episode(good), _episode(bad)],
                             [[[1.0] * len(good.response_ids)], [[-1.0] * len(bad.response_ids)]])
        params = [p for p in pol.model.parameters() if p.requires_grad]
        before = {str(i): copy.deepcopy(p.detach()) for i, p in enumerate(params)}
        opt = torch.optim.AdamW(params, lr=1e-6)  # RL's learning rate
        update_policy(pol, None, opt, params, rows, RlConfig(kl_coef=0.0, micro_batch_size=2))
        frac[name] = changed_fraction(before, {str(i): p.detach() for i, p in enumerate(params)})
    assert frac["fp32"] > 0.5 and abs(frac["bf16"] - frac["fp32"]) < 0.03, frac
    assert frac["pure"] < 0.5 * frac["fp32"], frac


def test_pure_bf16_is_asked_for_and_gpu_configs_keep_fp32_masters():
    with pytest.raises(ConfigError, match="pure_bf16 needs dtype bfloat16"):
        parse_train_config({"model": {"pure_bf16": True}})
    gpu = sorted(p for p in (REPO / "configs" / "train").glob("qwen*.yaml"))
    assert gpu
    for path in gpu:
        cfg = load_train_config(path)
        assert resolve_precision(cfg.model).master == torch.float32 and not cfg.model.pure_bf16, path.name
