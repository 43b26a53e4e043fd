"""The chunked cross-entropy equals the plain path (the model's full logits, then transformers' causal-LM loss) in
loss and in gradients, on random tensors and on the tiny Qwen2-VL through the SFT trainer's own `compute_loss`."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from tests.support.train_workspace import build_workspace, write_sft_export  # noqa: E402
from vrag_data.train.chunked_loss import capture_head_input, chunked_causal_lm_loss  # noqa: E402
from vrag_data.train.config import ModelConfig, TinyModelConfig  # noqa: E402
from vrag_data.train.data import collate, encode_example, load_sft_examples  # noqa: E402
from vrag_data.train.model import load_policy  # noqa: E402


def _plain(hidden, weight, bias, labels, n=None):
    from transformers.loss.loss_utils import ForCausalLMLoss

    logits = torch.nn.functional.linear(hidden, weight, bias)
    return ForCausalLMLoss(logits, labels, vocab_size=weight.shape[0], num_items_in_batch=n)


@pytest.mark.parametrize("chunk", [1, 5, 4096])
@pytest.mark.parametrize("n_items", [None, 23])
def test_loss_and_gradients_equal_the_full_logits_path(chunk, n_items):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 17, 8, generator=g, dtype=torch.float64)
    weight = torch.randn(50, 8, generator=g, dtype=torch.float64)
    bias = torch.randn(50, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 50, (2, 17), generator=g)
    labels[0, :6] = -100  # a prompt
    labels[1, 12:] = -100  # padding
    grads = []
    for fn in (_plain, lambda *a: chunked_causal_lm_loss(*a, chunk_tokens=chunk)):
        h, w, b = (x.clone().requires_grad_(True) for x in (hidden, weight, bias))
        loss = fn(h, w, b, labels, n_items)
        loss.backward()
        grads.append((float(loss), h.grad, w.grad, b.grad))
    (l0, *g0), (l1, *g1) = grads
    assert l1 == pytest.approx(l0, rel=1e-6)  # both upcast the logits to fp32, summed in another order
    for a, b in zip(g0, g1, strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_no_labelled_token_is_nan_as_in_the_plain_mean():
    h, w = torch.randn(1, 4, 3), torch.randn(7, 3)
    labels = torch.full((1, 4), -100)
    assert torch.isnan(chunked_causal_lm_loss(h, w, None, labels)) and torch.isnan(_plain(h, w, None, labels))


@pytest.fixture(scope="module")
def batch_and_policy(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunked")
    ws, _ = build_workspace(root / "ws", size=(84, 56))
    write_sft_export(ws, root / "export", n=3)
    ex, _ = load_sft_examples(root / "export")
    policy = load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112),
                         [t for e in ex for _, t in e.messages])
    encs = [encode_example(e, policy.tokenizer, policy.image_processor, cutoff_len=10_000) for e in ex]
    return collate(encs, policy.pad_id, policy.image_token_id), policy


def test_the_tiny_model_trains_the_same_with_the_head_input_caught(batch_and_policy):
    """The model run with its head's input caught, reduced in chunks of 7 tokens: the loss and every parameter's
    gradient of the plain forward (labels given to the model)."""
    batch, policy = batch_and_policy
    model = policy.model.train()
    model.zero_grad()
    plain = model(**batch).loss
    plain.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    inputs = dict(batch)
    labels = inputs.pop("labels")
    with capture_head_input(model.lm_head) as caught:
        out = model(**inputs)
    assert out.logits.shape[-1] == 1  # the full logits were never made
    loss = chunked_causal_lm_loss(caught.hidden, model.lm_head.weight, model.lm_head.bias, labels, chunk_tokens=7)
    loss.backward()
    assert float(loss) == pytest.approx(float(plain), rel=1e-5)
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(got) == set(want) and len(got) > 10
    for n, g in want.items():
        assert torch.allclose(got[n], g, rtol=1e-4, atol=1e-6), n
    assert "forward" not in vars(model.lm_head)  # the head is itself again
    assert model(**batch).logits.shape[-1] == model.lm_head.weight.shape[0]


def test_the_sft_trainer_logs_the_same_loss_chunked_or_not(tmp_path):
    """`vrag-data train sft` on the tiny model, chunked (the default) and with the full logits: the same losses."""
    from vrag_data.train.config import DataConfig, SftConfig, TrainConfig
    from vrag_data.train.sft import run_sft

    ws, _ = build_workspace(tmp_path / "ws", size=(84, 56))
    write_sft_export(ws, tmp_path / "export", n=4)
    losses = []
    for chunked in (True, False):
        cfg = TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                          data=DataConfig(path=str(tmp_path / "export"), cutoff_len=1024), output_dir=str(tmp_path / f"out-{chunked}"),
                          sft=SftConfig(max_steps=3, per_device_batch_size=2, learning_rate=1e-3, warmup_ratio=0.0,
                                        save_steps=1000, chunked_loss=chunked, loss_chunk_tokens=16))
        losses.append([loss for _, loss in run_sft(cfg, progress=False).losses])
    assert len(losses[0]) == 3 and losses[0] == pytest.approx(losses[1], rel=1e-4)
