"""Checkpoints that fit: the final model is bf16 safetensors (what a user loads); optimizer state is written only in
the resumable checkpoints a run asks for (`save_steps`), at most `save_total_limit` of them; a save that would fill
the disk stops with one line first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from vrag_data.errors import VragError  # noqa: E402
from vrag_data.train.checkpoint import check_space  # noqa: E402
from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig  # noqa: E402
from vrag_data.train.sft import run_sft  # noqa: E402


def _cfg(export: Path, out: Path, final_dtype: str = "bfloat16", **sft) -> TrainConfig:
    return TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                       data=DataConfig(path=str(export), cutoff_len=1024), output_dir=str(out), final_dtype=final_dtype,
                       sft=SftConfig(**{"per_device_batch_size": 2, "learning_rate": 1e-3, "warmup_ratio": 0.0, **sft}))


def _dtypes(folder: Path) -> set[str]:
    from safetensors import safe_open

    found = set()
    for f in folder.glob("*.safetensors"):
        with safe_open(str(f), "pt") as st:
            found |= {str(st.get_tensor(k).dtype) for k in st.keys() if st.get_tensor(k).is_floating_point()}
    return found


def _optimizer_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and "optimizer" in p.name)


def test_the_final_model_is_bf16_and_no_optimizer_state_is_written_unless_asked(export, tmp_path):
    out = tmp_path / "run"
    run_sft(_cfg(export, out, max_steps=3, save_steps=1000))
    assert _dtypes(out / "final") == {"torch.bfloat16"}
    assert not list(out.glob("checkpoint-*")) and _optimizer_files(out) == []
    # asked for: resumable checkpoints every 2 steps, the newest one kept, with their optimizer state and fp32 weights
    out2 = tmp_path / "resumable"
    run_sft(_cfg(export, out2, max_steps=4, save_steps=2, save_total_limit=1))
    assert sorted(p.name for p in out2.glob("checkpoint-*")) == ["checkpoint-4"]
    assert _optimizer_files(out2) == ["checkpoint-4/optimizer.pt"]
    assert _dtypes(out2 / "checkpoint-4") == {"torch.float32"} and _dtypes(out2 / "final") == {"torch.bfloat16"}


def test_final_dtype_float32_keeps_the_master_weights(export, tmp_path):
    run_sft(_cfg(export, tmp_path / "run", final_dtype="float32", max_steps=1, save_steps=1000))
    assert _dtypes(tmp_path / "run" / "final") == {"torch.float32"}


def test_a_save_the_disk_cannot_hold_stops_with_one_line(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    check_space(tmp_path / "out", 1 << 20, "the final model")  # a megabyte fits
    with pytest.raises(VragError) as err:
        check_space(tmp_path / "out", free + (4 << 30), "the resumable checkpoint of step 7")
    msg = str(err.value)
    assert "\n" not in msg and "checkpoint of step 7" in msg and str(tmp_path / "out") in msg and "GiB free" in msg
