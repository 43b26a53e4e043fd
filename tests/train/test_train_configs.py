"""The shipped train configs as a user chains them: each parses, and an RL config that starts from an SFT output
starts from one that a shipped SFT config writes (`<output_dir>/final`), so no config points at a folder nothing makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrag_data.train.config import load_train_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "train").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_train_config_parses(path):
    cfg = load_train_config(path)
    assert cfg.output_dir


def test_every_rl_config_starts_from_an_sft_output_a_shipped_config_writes():
    made = {f"{load_train_config(p).output_dir}/final" for p in CONFIGS if "-sft-" in p.name}
    starts = {p.name: load_train_config(p).model.path for p in CONFIGS if "-rl-" in p.name}
    from_sft = {name: path for name, path in starts.items() if path and path.startswith("train-out/")}
    assert from_sft, "no RL config starts from an SFT output"
    missing = {name: path for name, path in from_sft.items() if path not in made}
    assert not missing, f"RL configs starting from an SFT output no shipped config writes: {missing}"
