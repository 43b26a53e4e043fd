"""The SFT loop under DDP on two CPU processes (gloo, launched with torchrun as on a GPU node): it trains, saves a
resumable checkpoint, and a single process resumes it at the other world size with the same loss curve. The records
are one record repeated, so every global batch holds the same samples whatever the world size and the curves compare
step for step."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")

from tests.support.train_workspace import build_workspace, write_sft_export  # noqa: E402

CONFIG = """model:
  tiny: {hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
         vision_depth: 1, vision_embed_dim: 32, vision_num_heads: 2}
  min_pixels: 3136
  max_pixels: 7056
data: {cutoff_len: 1024}
sft: {max_steps: 4, per_device_batch_size: 1, learning_rate: 1.0e-3, lr_scheduler: constant, warmup_ratio: 0.0,
      save_steps: 2, logging_steps: 1}
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(cfg: Path, export: Path, out: Path, nproc: int, *sets: str) -> None:
    bin_dir = Path(sys.executable).parent
    launch = ([str(bin_dir / "torchrun"), "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
               "--master_port", str(_port()), "-m", "vrag_data.cli.main"] if nproc > 1 else [str(bin_dir / "vrag-data")])
    args = ["train", "sft", "--config", str(cfg), "--data", str(export), "-o", str(out)]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run([*launch, *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]


def _losses(checkpoint: Path) -> list[tuple[int, float]]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return [(x["step"], x["loss"]) for x in state["log_history"] if "loss" in x]


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_then_resumed_on_one(tmp_path):
    ws, _ = build_workspace(tmp_path / "ws", size=(84, 56))
    export = tmp_path / "export"
    write_sft_export(ws, export, n=1)
    rows = json.loads((export / "vrag_sft.json").read_text())
    (export / "vrag_sft.json").write_text(json.dumps(rows * 4))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    _train(cfg, export, tmp_path / "straight", 2)  # 4 steps on two processes
    _train(cfg, export, tmp_path / "resumed", 2, "sft.max_steps=2")  # 2 steps on two processes...
    # both ranks took part: each wrote its RNG state into the checkpoint
    assert sorted(p.name for p in (tmp_path / "resumed" / "checkpoint-2").glob("rng_state_*.pth")) == \
        ["rng_state_0.pth", "rng_state_1.pth"]
    _train(cfg, export, tmp_path / "resumed", 1, "sft.per_device_batch_size=2")  # ...then one, the same global batch
    straight, resumed = _losses(tmp_path / "straight" / "checkpoint-4"), _losses(tmp_path / "resumed" / "checkpoint-4")
    assert [s for s, _ in straight] == [s for s, _ in resumed] == [1, 2, 3, 4]
    assert [v for _, v in resumed] == pytest.approx([v for _, v in straight], rel=1e-5)
    assert straight[-1][1] < straight[0][1]
