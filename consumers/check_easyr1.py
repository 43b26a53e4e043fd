"""Run EasyR1's own config, dataset and reward loading on an export (inside an EasyR1 environment, from the export
root). EasyR1 is not on the package registry: its source checkout is put on the path (`EASYR1_SRC`). vLLM (CUDA
only) is an import-only stub: EasyR1's config module imports its rollout worker; nothing here rolls out.

    EASYR1_SRC=<checkout> python check_easyr1.py <export root> <tiny model dir>

- Config: EasyR1's own `verl.trainer.main.main()` parses `config=easyr1/data_config.yaml` plus the keys the file's
  header says a user must set (the header must name each), exactly as its CLI does (`OmegaConf.from_cli`, merged
  over `PPOConfig`, `deep_post_init`); Ray is replaced by a stand-in that hands the parsed config back instead of
  starting a run. The data folders it names hold the export's jsonl (a missing one would make EasyR1 fetch that name
  from the Hub: HF_HUB_OFFLINE is set) and the reward file exists.
- `verl.utils.dataset.RLHFDataset` with those data settings: every row survives the length filter and every item
  tokenizes with its images;
- `verl.workers.reward.function.AutoRewardManager` loads the shipped reward function (standard library only); for
  every row a right rollout (rollouts.py) outscores the same rollout with a wrong final answer, on EasyR1's reward
  inputs (response, response_length, ground_truth). The rule scorers are asked for explicitly (no model judge here).
- The tasks whose questions the training items' prompt tokens (`raw_prompt_ids`, decoded) hold are reported
  (`splits`): the test asserts none is a held-out test task.
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

from transformers import AutoProcessor, AutoTokenizer  # noqa: E402

import splits  # noqa: E402
from rollouts import right_and_wrong, sft_rollouts  # noqa: E402
from verl.trainer.config import PPOConfig  # noqa: E402
from verl.utils.dataset import RLHFDataset  # noqa: E402
from verl.workers.reward.function import AutoRewardManager  # noqa: E402


USER_KEYS = ("worker.actor.model.model_path", "trainer.n_gpus_per_node", "trainer.nnodes", "data.rollout_batch_size",
             "worker.actor.global_batch_size")


def parse_config(keys: list[str]) -> PPOConfig:
    """The config EasyR1's CLI builds from `config=easyr1/data_config.yaml` and `keys` (its own main(), up to the run)."""
    import types

    import verl.trainer.main as easyr1_main

    got: dict = {}
    easyr1_main.ray = types.SimpleNamespace(is_initialized=lambda: True, get=lambda _: None, timeline=lambda **_: None)
    easyr1_main.Runner = types.SimpleNamespace(remote=lambda: types.SimpleNamespace(
        run=types.SimpleNamespace(remote=lambda cfg: got.setdefault("cfg", cfg))))
    argv = sys.argv
    sys.argv = ["verl.trainer.main", "config=easyr1/data_config.yaml", *keys]
    try:
        easyr1_main.main()
    finally:
        sys.argv = argv
    return got["cfg"]


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    os.environ["VRAG_REWARD_JUDGE"] = "rules"
    head = (root / "easyr1" / "data_config.yaml").read_text().split("\ndata:")[0]
    for key in USER_KEYS:
        assert key in head, f"easyr1/data_config.yaml does not name {key} in its header"
    n_train = sum(len(f.read_text().splitlines()) for f in (root / "easyr1" / "train").glob("*.jsonl"))
    cfg = parse_config([f"worker.actor.model.model_path={model_dir}", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
                        f"data.rollout_batch_size={n_train}", f"worker.actor.global_batch_size={n_train}"])
    data = cfg.data
    for folder in (data.train_files, data.val_files):
        assert (root / folder).is_dir() and list((root / folder).glob("*.jsonl")), f"{folder}: no such data folder"
    assert Path(cfg.worker.reward.reward_function).is_file(), cfg.worker.reward.reward_function
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = AutoProcessor.from_pretrained(model_dir)
    rows = [json.loads(line) for f in sorted(Path(data.train_files).glob("*.jsonl")) for line in f.read_text().splitlines()]
    ds = RLHFDataset(data_path=data.train_files, tokenizer=tokenizer, processor=processor, prompt_key=data.prompt_key,
                     answer_key=data.answer_key, image_key=data.image_key, image_dir=data.image_dir,
                     max_prompt_length=data.max_prompt_length, truncation="right", min_pixels=data.min_pixels,
                     max_pixels=data.max_pixels, filter_overlong_prompts=True, filter_overlong_prompts_workers=1)
    assert len(ds) == len(rows), f"EasyR1 kept {len(ds)} of {len(rows)} rows (max_prompt_length {data.max_prompt_length})"
    n_images, found, held = 0, [], splits.load()
    for i in range(len(ds)):
        item = ds[i]
        n_images += len(item["multi_modal_data"]["images"])
        found.append(splits.tasks_in(tokenizer.decode(item["raw_prompt_ids"]), held))
    manager = AutoRewardManager(cfg.worker.reward, tokenizer)
    sft = sft_rollouts(root)
    val = [json.loads(line) for f in sorted(Path(data.val_files).glob("*.jsonl")) for line in f.read_text().splitlines()]
    scored, how = 0, {}
    for row in rows + ([] if data.val_files == data.train_files else val):
        right, wrong, src = right_and_wrong(row["task_id"], row["answer"], sft)
        inputs = [{"response": r, "response_length": len(r), "ground_truth": row["answer"]} for r in (right, wrong)]
        good, bad = manager.reward_fn(inputs)
        assert good["overall"] > bad["overall"], f"{row['id']}: right {good} <= wrong {bad}"
        scored += 1
        how[src] = how.get(src, 0) + 1
    return {"consumer": "easyr1", "rows": len(ds), "splits": splits.report(found if held else [], held), "images": n_images, "rewards_checked": scored, "rollouts": how,
            "max_prompt_length": data.max_prompt_length, "config": "easyr1/data_config.yaml"}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
