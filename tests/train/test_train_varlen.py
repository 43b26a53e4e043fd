"""Packed rows without flash-attn: `vrag_varlen` runs causal sdpa per record (cut where the text positions restart)
and never builds an L x L mask; it gives every record its unpacked outputs, and SFT picks it for packed rows."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig  # noqa: E402
from vrag_data.train.data import IGNORE, collate, encode_example, load_sft_examples  # noqa: E402
from vrag_data.train.model import load_policy  # noqa: E402
from vrag_data.train.packing import PACKED_LENGTHS, collate_packed, packed_position_ids  # noqa: E402
from vrag_data.train.varlen import NAME, choose_packed_attention, record_starts, varlen_attention  # noqa: E402


def test_record_starts_where_text_positions_restart():
    assert record_starts(torch.tensor([0, 1, 2, 0, 1, 0, 1, 2, 3])) == [0, 3, 5]
    assert record_starts(torch.tensor([5, 6, 0, 1])) == [0, 2]  # a row always starts a record


@pytest.mark.parametrize("groups", [1, 2])
def test_equal_to_one_attention_under_a_block_diagonal_mask(groups):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 9, 8, generator=g)
    k, v = torch.randn(2, 4 // groups, 9, 8, generator=g), torch.randn(2, 4 // groups, 9, 8, generator=g)
    pos = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 1], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
    got, _ = varlen_attention(torch.nn.Module().eval(), q, k, v, None, scaling=0.3, position_ids=pos)
    seg = torch.stack([torch.cumsum((p == 0).long(), 0) for p in pos])  # record number of each token
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    mask = (seg[:, :, None] == seg[:, None, :]) & causal  # what sdpa needs as an L x L mask
    kk, vv = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    want = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask[:, None], scale=0.3).transpose(1, 2)
    assert got.shape == (2, 9, 4, 8) and torch.allclose(got, want, atol=1e-6)


def test_packed_records_get_their_unpacked_losses_and_gradients(export):
    ex, _ = load_sft_examples(export)
    policy = load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112),
                         [t for e in ex for _, t in e.messages])
    model = policy.model.train()
    encs = [encode_example(e, policy.tokenizer, policy.image_processor, cutoff_len=10_000) for e in ex[:3]]

    def summed(logits, labels):
        return torch.nn.functional.cross_entropy(logits[:-1].float(), labels[1:], ignore_index=IGNORE, reduction="sum")

    model.zero_grad()
    alone = sum(summed(model(**(b := collate([e], policy.pad_id, policy.image_token_id))).logits[0], b["labels"][0])
                for e in encs)
    alone.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert choose_packed_attention(model, None) == NAME  # no flash-attn here
    model.zero_grad()
    packed = collate_packed([[encs[0], encs[1]], [encs[2]]], policy.pad_id, policy.image_token_id)
    lengths = packed.pop(PACKED_LENGTHS)
    pos = packed_position_ids(model, packed["input_ids"], packed["mm_token_type_ids"], packed.get("image_grid_thw"), lengths)
    logits = model(**packed, position_ids=pos, use_cache=False).logits
    n0, n1, n2 = (len(e.input_ids) for e in encs)
    lab = packed["labels"]
    total = summed(logits[0, :n0], lab[0, :n0]) + summed(logits[0, n0:n0 + n1], lab[0, n0:n0 + n1]) \
        + summed(logits[1, :n2], lab[1, :n2])
    total.backward()
    assert float(total) == pytest.approx(float(alone), rel=1e-5)
    for n, g in want.items():
        assert torch.allclose(dict(model.named_parameters())[n].grad, g, rtol=1e-4, atol=1e-6), n


def test_packed_sft_names_the_kernel_and_saves_a_model_that_loads_anywhere(export, tmp_path, capsys):
    from vrag_data.train.sft import run_sft

    cfg = TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                      data=DataConfig(path=str(export), cutoff_len=1024), output_dir=str(tmp_path / "out"),
                      sft=SftConfig(max_steps=2, packing=True, learning_rate=1e-3, warmup_ratio=0.0, save_steps=1000))
    result = run_sft(cfg)
    assert "one causal sdpa per record" in result.attention and NAME in result.attention
    saved = json.loads((tmp_path / "out" / "final" / "config.json").read_text())
    assert NAME not in json.dumps(saved)  # the final model names no kernel of this process
    assert load_policy(ModelConfig(path=str(tmp_path / "out" / "final"), min_pixels=56 * 56, max_pixels=84 * 84))
