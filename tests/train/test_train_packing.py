"""Fast SFT: packing without cross-record attention, exact lengths, checkpointing that skips a frozen vision
tower, length-grouped and packed runs that log tokens/s."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig
from vrag_data.train.data import IGNORE, collate, encode_example, load_sft_examples, record_length
from vrag_data.train.model import load_policy
from vrag_data.train.packing import PACKED_LENGTHS, collate_packed, pack_bins, packed_position_ids


@pytest.fixture(scope="module")
def policy(export):
    ex, _ = load_sft_examples(export)
    return load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112),
                       [t for e in ex for _, t in e.messages])


def test_pack_bins_first_fit_decreasing():
    # by length: 8 (#2) opens bin 0, 5 (#0) bin 1, 4 (#4) fits bin 1, 3 (#1) opens bin 2, 2 (#3) fills bin 0
    assert pack_bins([5, 3, 8, 2, 4], 10) == [[2, 3], [0, 4], [1]]
    assert pack_bins([12, 1], 10) == [[0], [1]]  # an over-long item sits alone
    assert pack_bins([], 10) == []


def test_record_length_is_exact(export, policy):
    ex, _ = load_sft_examples(export)
    for e in ex:
        enc = encode_example(e, policy.tokenizer, policy.image_processor, cutoff_len=10_000, default_system="S")
        assert record_length(e, policy.tokenizer, policy.image_processor, "S") == len(enc.input_ids)


def _record_losses(logits: torch.Tensor, labels: torch.Tensor, spans: list[tuple[int, int, int]]) -> list[float]:
    """Summed next-token cross-entropy of each (row, start, length) span, in fp64."""
    out = []
    for r, a, n in spans:
        lg, lb = logits[r, a : a + n - 1].double(), labels[r, a + 1 : a + n]
        out.append(float(torch.nn.functional.cross_entropy(lg, lb, ignore_index=IGNORE, reduction="sum")))
    return out


def test_packed_rows_give_every_record_its_unpacked_loss(export, policy):
    ex, _ = load_sft_examples(export)
    tok, ip = policy.tokenizer, policy.image_processor
    encs = [encode_example(e, tok, ip, cutoff_len=10_000) for e in ex[:3]]
    model = policy.model.eval()
    with torch.no_grad():
        alone, alone_logits = [], []
        for e in encs:
            b = collate([e], policy.pad_id, policy.image_token_id)
            logits = model(**b).logits
            alone += _record_losses(logits, b["labels"], [(0, 0, len(e.input_ids))])
            alone_logits.append(logits[0])
        # two rows: records 0+1 packed, record 2 alone with a padding tail
        packed = collate_packed([[encs[0], encs[1]], [encs[2]]], policy.pad_id, policy.image_token_id)
        lengths = packed.pop(PACKED_LENGTHS)
        n0, n1, n2 = (len(e.input_ids) for e in encs)
        assert lengths == [[n0, n1], [n2, n0 + n1 - n2]]  # row 1 = record 2 + its padding tail
        pos = packed_position_ids(model, packed["input_ids"], packed["mm_token_type_ids"],
                                  packed.get("image_grid_thw"), lengths)
        spans = [(0, 0, n0), (0, n0, n1), (1, 0, n2)]
        logits = model(**packed, position_ids=pos, use_cache=False).logits
        assert _record_losses(logits, packed["labels"], spans) == pytest.approx(alone, rel=1e-5)
        for (r, a, n), ref in zip(spans, alone_logits, strict=True):
            assert float((logits[r, a : a + n] - ref).abs().max()) < 1e-4
        # the same row with one running position lets record 1 attend to record 0: its logits move
        flat = torch.arange(packed["input_ids"].shape[1]).expand(4, 2, -1)
        leaked = model(**packed, position_ids=flat, use_cache=False).logits
        assert float((leaked[0, n0 : n0 + n1] - alone_logits[1]).abs().max()) > 1e-2
    # the first token of every packed record is never a target
    assert int(packed["labels"][0, n0]) == IGNORE


def test_checkpointing_runs_a_frozen_vision_tower_once(export):
    ex, _ = load_sft_examples(export)
    pol = load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112,
                                  gradient_checkpointing=True), [t for e in ex for _, t in e.messages])
    model = pol.model.train()
    # what older transformers / PEFT do with reentrant checkpointing: ask every input embedding for gradients
    model.enable_input_require_grads()
    calls = {"vision": 0, "text": 0}
    # pre-hooks on a submodule: the checkpoint wraps the layer's forward (its own hooks run once) and its
    # recompute stops early, after the last saved tensor it needs (a post-hook on the mlp would not fire)
    for blk in model.model.visual.blocks:
        blk.mlp.register_forward_pre_hook(lambda *_: calls.__setitem__("vision", calls["vision"] + 1))
    for layer in model.model.language_model.layers:
        layer.mlp.register_forward_pre_hook(lambda *_: calls.__setitem__("text", calls["text"] + 1))
    enc = encode_example(ex[0], pol.tokenizer, pol.image_processor, cutoff_len=10_000)
    out = model(**collate([enc], pol.pad_id, pol.image_token_id))
    out.loss.backward()
    n_vis, n_text = len(model.model.visual.blocks), len(model.model.language_model.layers)
    assert calls["text"] == 2 * n_text  # language-model layers are checkpointed: forward + recompute
    assert calls["vision"] == n_vis  # the frozen tower ran once and was never recomputed
    assert all(p.grad is None for p in model.model.visual.parameters())


def _cfg(export: Path, out: Path, **sft) -> TrainConfig:
    return TrainConfig(
        model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
        data=DataConfig(path=str(export), cutoff_len=1024),
        sft=SftConfig(**{"per_device_batch_size": 2, "learning_rate": 1e-2, "warmup_ratio": 0.0,
                         "save_steps": 1000, "max_steps": 3, **sft}),
        output_dir=str(out),
    )


def test_packed_and_length_grouped_sft_run_and_log_throughput(export, tmp_path, capsys):
    from vrag_data.train.sft import describe, run_sft

    packed = run_sft(_cfg(export, tmp_path / "packed", packing=True, packing_len=1024, per_device_batch_size=1))
    err = capsys.readouterr().err
    assert "records packed into" in err and "attention: " in err and "precision fp32" in err
    assert packed.global_step == 3 and all(loss == loss for _, loss in packed.losses)
    assert packed.tokens_per_s and packed.tokens_per_s > 0 and packed.mfu is None  # no GPU peak on a CPU
    assert describe(packed)["tokens_per_s"] > 0
    grouped = run_sft(_cfg(export, tmp_path / "grouped", group_by_length=True))
    assert grouped.global_step == 3 and grouped.tokens_per_s
