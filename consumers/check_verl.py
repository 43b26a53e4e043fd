"""Run verl's own config loader, dataset and reward loading on an export (inside verl's environment, from the export
root).

    python check_verl.py <export root> <tiny model dir>

- Config: verl's own CLI entry (`python -m verl.trainer.main_ppo --config-dir=verl --config-name=config`, Hydra)
  composes the shipped `verl/config.yaml` with verl's `ppo_trainer`, with only the keys its header says a user must
  set given on the command line (the header must name each); `--cfg job` prints the composed config and stops
  before training. Every file the composed config names (data files, the reward) exists under the export folder.
- `verl.utils.dataset.rl_dataset.RLHFDataset` with the composed `data` config (only `cache_dir` names this machine):
  every row survives the length filter, each item builds its chat with one image part per image entry, and the
  images open from the export folder.
- `verl.trainer.ppo.reward.get_custom_reward_fn` on the composed config loads `reward.custom_reward_function`
  (reward/compute_score.py; vrag-data is not installed here). For every row, a right rollout (rollouts.py) must
  outscore the same rollout with a wrong final answer, and every score dict of an export has the same keys (verl
  requires it). The rule scorers are asked for explicitly (no model judge here).
- VRAG-RL's fork reads rows with pandas and then `file_name`, `reference_page`, `extra_info['question']`,
  `extra_info['answer']` and `data_source`: those reads are done the same way and must name the gold pages (its
  reward manager itself runs in check_vragrl.py).
- A second `RLHFDataset` on the composed `train_files` alone: the tasks whose questions its items' prompts hold are
  reported (`splits`); the test asserts none is a held-out test task.
Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from omegaconf import OmegaConf, open_dict
from transformers import AutoProcessor, AutoTokenizer

import splits
from rollouts import right_and_wrong, sft_rollouts
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset

VRAG_RL_SOURCES = {"rag", "slidevqa_test", "mmlongdoc", "vidoseek"}  # the data sources VRAG-RL's reward dispatches on
MODEL_KEY = "actor_rollout_ref.model.path"


def hydra_config(name: str, keys: list[str], module: str = "verl.trainer.main_ppo", env: dict | None = None):
    """The config the trainer's own CLI composes from `verl/<name>.yaml` plus `keys` (`--cfg job`: print, no run)."""
    proc = subprocess.run([sys.executable, "-m", module, "--config-dir=verl", f"--config-name={name}", *keys,
                           "--cfg", "job"], capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{module} --config-name={name}: {proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"[a-z_][a-z0-9_]*:( |$)", line))  # past any log line
    return OmegaConf.create("\n".join(lines[start:]))


def config_resolves(root: Path, model_dir: Path):
    bare = hydra_config("config", [])
    head = (root / "verl" / "config.yaml").read_text().split("\ndefaults:")[0]
    for key in (MODEL_KEY, "trainer.n_gpus_per_node", "trainer.nnodes", "data.train_batch_size",
                "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.strategy"):
        assert key in head, f"verl/config.yaml does not name {key} in its header"
    n_train = sum(pq.ParquetFile(f).metadata.num_rows for f in bare.data.train_files)
    cfg = hydra_config("config", [f"{MODEL_KEY}={model_dir}", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
                                  "actor_rollout_ref.rollout.name=vllm", f"data.train_batch_size={n_train}",
                                  f"actor_rollout_ref.actor.ppo_mini_batch_size={n_train}"])
    assert cfg.actor_rollout_ref.model.path == str(model_dir)
    named = [*cfg.data.train_files, *cfg.data.val_files, cfg.reward.custom_reward_function.path]
    missing = [p for p in named if not (root / p).is_file()]
    assert not missing, f"the composed config names files the export lacks: {missing}"
    return cfg


def prompt_text(messages: list[dict]) -> str:
    """The text of a chat as verl's dataset item holds it (a message's content: a string or typed parts)."""
    return "\n".join(m["content"] if isinstance(m["content"], str) else
                     "".join(p.get("text") or "" for p in m["content"] if p.get("type") == "text") for m in messages)


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    os.environ["VRAG_REWARD_JUDGE"] = "rules"  # no model judge on this machine: the rule scorers, asked for explicitly
    cfg = config_resolves(root, model_dir)
    data = cfg.data
    with open_dict(data):
        data.cache_dir = tempfile.mkdtemp(prefix="verl-cache-")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = AutoProcessor.from_pretrained(model_dir)
    files = [*data.train_files, *(f for f in data.val_files if f not in data.train_files)]
    n_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    ds = RLHFDataset(data_files=list(files), tokenizer=tokenizer, config=data, processor=processor)
    assert len(ds) == n_rows, f"verl kept {len(ds)} of {n_rows} rows (max_prompt_length {data.max_prompt_length})"
    n_images = 0
    for i in range(len(ds)):
        row = ds.dataframe[i]
        item = ds[i]
        parts = [p for m in item["raw_prompt"] if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
        expected = len(row.get("images") or [])
        assert len(parts) == expected, f"{row['id']}: {len(parts)} image parts for {expected} images"
        if parts:
            images, _, _ = ds._process_multi_modal_info(item["raw_prompt"], ds.image_patch_size, ds.config)
            assert len(images) == expected
        n_images += expected

    held = splits.load()
    train = RLHFDataset(data_files=list(data.train_files), tokenizer=tokenizer, config=data, processor=processor)
    found = [splits.tasks_in(prompt_text(train[i]["raw_prompt"]), held) for i in range(len(train))] if held else []

    reward = get_custom_reward_fn(cfg)  # verl's loader, on the composed config: reward.custom_reward_function
    assert reward is not None, "the composed config names no custom reward function"
    sft = sft_rollouts(root)
    scored, keys, how = 0, set(), {}
    for f in files:
        for row in pq.read_table(f).to_pylist():
            gt = row["reward_model"]["ground_truth"]
            right_s, wrong_s, src = right_and_wrong(row["extra_info"]["task_id"], gt, sft)
            right = reward(data_source=row["data_source"], solution_str=right_s, ground_truth=gt, extra_info=row["extra_info"])
            wrong = reward(data_source=row["data_source"], solution_str=wrong_s, ground_truth=gt, extra_info=row["extra_info"])
            assert right["score"] > wrong["score"], f"{row['id']}: right {right} <= wrong {wrong}"
            keys.add(tuple(sorted(right)))
            keys.add(tuple(sorted(wrong)))
            scored += 1
            how[src] = how.get(src, 0) + 1
    assert len(keys) <= 1, f"score dicts differ in keys: {keys}"

    # VRAG-RL's fork: pandas rows, then the fields its trainer and reward manager read
    for f in files:
        for rec in (r.to_dict() for _, r in pd.read_parquet(f).iterrows()):
            extra = rec["extra_info"]
            assert extra["question"] and extra["answer"] is not None
            pages = [f"{rec['file_name'].split('.pdf')[0]}_{p}" for p in rec["reference_page"].tolist()]
            assert set(pages) <= set(extra["gold_pages"].tolist()), f"{rec['id']}: {pages} vs {extra['gold_pages']}"
            if extra["reward"] == "vrag_rl":
                assert rec["data_source"] in VRAG_RL_SOURCES, rec["data_source"]
    return {"consumer": "verl", "rows": len(ds), "splits": splits.report(found, held), "images": n_images, "rewards_checked": scored, "rollouts": how,
            "max_prompt_length": data.max_prompt_length, "config": "verl/config.yaml"}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
