"""Run EasyR1's own config, dataset and reward loading on an export (inside an EasyR1 environment, from the export
root). EasyR1 is not on the package registry: its source checkout is put on the path (`EASYR1_SRC`). vLLM (CUDA
only) is an import-only stub: EasyR1's config module imports its rollout worker; nothing here rolls out.

    EASYR1_SRC=<checkout> python check_easyr1.py <export root> <tiny model dir>

- `verl.trainer.config.PPOConfig` merged with the shipped `easyr1/data_config.yaml` (as `config=` does), then the
  data and reward sections' own `post_init` (relative paths resolved from the export folder);
- `verl.utils.dataset.RLHFDataset` with those data settings: every row survives the length filter and every item
  tokenizes with its images;
- `verl.workers.reward.function.AutoRewardManager` loads the shipped reward function; the export's own SFT answer for
  a task (its turns and observations as one response) outscores the same rollout with a wrong final answer, on
  EasyR1's reward inputs (response, ground_truth).
Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ["EASYR1_SRC"])
sys.path.insert(0, str(Path(__file__).resolve().parent / "stubs_easyr1"))
import vllm_stub  # noqa: E402  - vLLM needs CUDA; EasyR1's config module imports its rollout worker

vllm_stub.install()

import pyarrow.parquet as pq  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoProcessor, AutoTokenizer  # noqa: E402

from verl.trainer.config import PPOConfig  # noqa: E402
from verl.utils.dataset import RLHFDataset  # noqa: E402
from verl.workers.reward.function import AutoRewardManager  # noqa: E402


def rollouts(root: Path) -> dict[str, str]:
    """task id -> one response string from the export's SFT records (the first record of each task): its assistant
    turns and the observations between them, as a multi-turn response decodes."""
    out: dict[str, str] = {}
    for f in sorted((root / "hf" / "data").glob("sft-*.parquet")):
        for row in pq.read_table(f, columns=["task_id", "messages"]).to_pylist():
            msgs = row["messages"]
            first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
            out.setdefault(row["task_id"], "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs[first:]))
    return out


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    os.environ["VRAG_REWARD_JUDGE"] = "rules"
    merged = OmegaConf.merge(OmegaConf.structured(PPOConfig()), OmegaConf.load("easyr1/data_config.yaml"))
    cfg: PPOConfig = OmegaConf.to_object(merged)
    cfg.data.post_init()
    cfg.worker.reward.post_init()
    data = cfg.data
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = AutoProcessor.from_pretrained(model_dir)
    rows = [json.loads(line) for f in sorted(Path(data.train_files).glob("*.jsonl")) for line in f.read_text().splitlines()]
    ds = RLHFDataset(data_path=data.train_files, tokenizer=tokenizer, processor=processor, prompt_key=data.prompt_key,
                     answer_key=data.answer_key, image_key=data.image_key, image_dir=data.image_dir,
                     max_prompt_length=data.max_prompt_length, truncation="right", min_pixels=data.min_pixels,
                     max_pixels=data.max_pixels, filter_overlong_prompts=True, filter_overlong_prompts_workers=1)
    assert len(ds) == len(rows), f"EasyR1 kept {len(ds)} of {len(rows)} rows (max_prompt_length {data.max_prompt_length})"
    n_images = 0
    for i in range(len(ds)):
        item = ds[i]
        n_images += len(item["multi_modal_data"]["images"])
    manager = AutoRewardManager(cfg.worker.reward, tokenizer)
    sft = rollouts(root)
    scored = 0
    for row in rows:
        response = sft.get(row["task_id"])
        if response is None or "<answer>" not in response:
            continue
        i, j = response.rindex("<answer>"), response.rindex("</answer>")
        wrong = response[:i] + "<answer>zzz no such value</answer>" + response[j + len("</answer>"):]
        inputs = [{"response": r, "response_length": len(r), "ground_truth": row["answer"]} for r in (response, wrong)]
        good, bad = manager.reward_fn(inputs)
        assert good["overall"] > bad["overall"], f"{row['id']}: right {good} <= wrong {bad}"
        scored += 1
    return {"consumer": "easyr1", "rows": len(ds), "images": n_images, "rewards_checked": scored,
            "max_prompt_length": data.max_prompt_length}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
