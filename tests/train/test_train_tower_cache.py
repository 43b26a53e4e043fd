"""A frozen vision tower runs once per page image: its features are reused, bit for bit, by later records and epochs
that show the same page; a trained tower or projector is never cached."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig  # noqa: E402
from vrag_data.train.data import collate, encode_example, load_sft_examples  # noqa: E402
from vrag_data.train.model import load_policy  # noqa: E402
from vrag_data.train.tower_cache import TowerCache, enable_tower_cache  # noqa: E402


def _policy(export: Path, **model):
    ex, _ = load_sft_examples(export)
    policy = load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112, **model),
                         [t for e in ex for _, t in e.messages])
    encs = [encode_example(e, policy.tokenizer, policy.image_processor, cutoff_len=10_000) for e in ex]
    return policy, encs


def test_cached_features_are_the_towers_own_and_each_page_runs_once(export):
    policy, encs = _policy(export)
    model = policy.model.eval()
    batch = collate(encs[:2], policy.pad_id, policy.image_token_id)
    n_images = int(batch["image_grid_thw"].shape[0])
    with torch.no_grad():
        plain = model(**batch).logits
        cache = enable_tower_cache(model, 1 << 30)
        assert cache is not None
        first = model(**batch).logits
        again = model(**batch).logits  # the next epoch: every page from the cache
    assert torch.equal(plain, first) and torch.equal(plain, again)
    assert (cache.misses, cache.hits) == (n_images, n_images) and n_images > 0
    # a batch mixing a held page with new ones runs only the new ones, in order
    with torch.no_grad():
        mixed = collate([encs[1], encs[2]], policy.pad_id, policy.image_token_id)
        before = cache.misses
        got = model(**mixed).logits
    uncached = _policy(export)[0].model.eval()
    uncached.load_state_dict(model.state_dict())
    with torch.no_grad():  # the tower ran on fewer images at once: the same values up to the matmuls' summation order
        want = uncached(**mixed).logits
    assert float((got - want).abs().max()) < 1e-5
    assert cache.misses - before == int(mixed["image_grid_thw"].shape[0]) - int(collate([encs[1]], policy.pad_id, policy.image_token_id)["image_grid_thw"].shape[0])


def test_a_training_tower_or_projector_is_not_cached(export):
    policy, _ = _policy(export, freeze_projector=False)
    assert enable_tower_cache(policy.model, 1 << 30) is None


def test_the_cache_holds_at_most_its_bytes_least_recently_used_out():
    cache = TowerCache(max_bytes=3 * 4 * 10)  # three fp32 features of 10 values
    for k in "abc":
        cache.put(k, torch.zeros(10))
    assert cache.get("a") is not None  # a is used: b is now the oldest
    cache.put("d", torch.zeros(10))
    assert list(cache.held) == ["c", "a", "d"] and cache.size == 120
    cache.put("huge", torch.zeros(100))  # larger than the whole cache: not held
    assert "huge" not in cache.held


def test_sft_epochs_reuse_the_pages_and_train_the_same(export, tmp_path):
    from vrag_data.train.sft import run_sft

    runs = []
    for gib in (4.0, 0.0):
        cfg = TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                          data=DataConfig(path=str(export), cutoff_len=1024), output_dir=str(tmp_path / f"out-{gib}"),
                          sft=SftConfig(epochs=2, per_device_batch_size=2, learning_rate=1e-3, warmup_ratio=0.0,
                                        save_steps=1000, tower_cache_gib=gib))
        runs.append(run_sft(cfg))
    cached, plain = runs
    assert cached.tower_reused > 0 and plain.tower_reused == 0  # the second epoch's pages came from the cache
    assert [loss for _, loss in cached.losses] == pytest.approx([loss for _, loss in plain.losses], rel=1e-6)
