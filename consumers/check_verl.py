"""Run verl's own dataset and reward loading on an export (run inside verl's environment, from the export root).

    python check_verl.py <export root> <tiny model dir>

- `verl.utils.dataset.rl_dataset.RLHFDataset` with the shipped `verl/config.yaml` (`data` keys as written; only
  `cache_dir` and the worker count name this machine): every row survives the length filter, each item builds its
  chat with one image part per image entry, and the images open from the export folder.
- `verl.trainer.ppo.reward.get_custom_reward_fn` loads the shipped `custom_reward_function` (reward/compute_score.py;
  vrag-data is not installed here). Rollouts are the export's own SFT trajectories for the same task (assistant turns
  and observations as one response string); the same rollout with a wrong final answer must score lower, and every
  score dict of an export has the same keys (verl requires it). The rule scorers are asked for explicitly.
- VRAG-RL's fork (not on the package registry) reads rows with pandas and then `file_name`, `reference_page`,
  `extra_info['question']`, `extra_info['answer']` and `data_source` (its ray_trainer.py and reward_manager/rm.py):
  those reads are done the same way and must name the gold pages.
Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import yaml
from omegaconf import OmegaConf
from transformers import AutoProcessor, AutoTokenizer

from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset

VRAG_RL_SOURCES = {"rag", "slidevqa_test", "mmlongdoc", "vidoseek"}  # the data sources VRAG-RL's reward dispatches on


def rollouts(root: Path) -> dict[str, str]:
    """task id -> one response string from the export's SFT records (the first record of each task)."""
    out: dict[str, str] = {}
    for f in sorted((root / "hf" / "data").glob("sft-*.parquet")):
        for row in pq.read_table(f, columns=["task_id", "messages"]).to_pylist():
            msgs = row["messages"]
            first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs[first:])
            out.setdefault(row["task_id"], text)
    return out


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    os.environ["VRAG_REWARD_JUDGE"] = "rules"  # no model judge on this machine: the rule scorers, asked for explicitly
    cfg = yaml.safe_load((root / "verl" / "config.yaml").read_text())
    data = dict(cfg["data"], cache_dir=tempfile.mkdtemp(prefix="verl-cache-"), filter_overlong_prompts_workers=1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = AutoProcessor.from_pretrained(model_dir)
    files = list(data["train_files"])
    n_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    ds = RLHFDataset(data_files=files, tokenizer=tokenizer, config=OmegaConf.create(data), processor=processor)
    assert len(ds) == n_rows, f"verl kept {len(ds)} of {n_rows} rows (max_prompt_length {data['max_prompt_length']})"
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

    reward = get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": cfg["custom_reward_function"]}}))
    assert reward is not None
    sft = rollouts(root)
    scored, keys = 0, set()
    for f in files:
        for row in pq.read_table(f).to_pylist():
            response = sft.get(row["extra_info"]["task_id"])
            if response is None:
                continue
            gt = row["reward_model"]["ground_truth"]
            answers = re.findall(r"<answer>(.*?)</answer>", response, re.S)
            if not answers:
                continue
            wrong_response = response[: response.rindex("<answer>")] + "<answer>zzz no such value</answer>" + response[response.rindex("</answer>") + 9 :]
            right = reward(data_source=row["data_source"], solution_str=response, ground_truth=gt, extra_info=row["extra_info"])
            wrong = reward(data_source=row["data_source"], solution_str=wrong_response, ground_truth=gt, extra_info=row["extra_info"])
            assert right["score"] > wrong["score"], f"{row['id']}: right {right} <= wrong {wrong}"
            keys.add(tuple(sorted(right)))
            keys.add(tuple(sorted(wrong)))
            scored += 1
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
    return {"consumer": "verl", "rows": len(ds), "images": n_images, "rewards_checked": scored,
            "max_prompt_length": data["max_prompt_length"]}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
