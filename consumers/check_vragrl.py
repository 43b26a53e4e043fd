"""Run VRAG-RL's own trainer code (its verl fork, 0.2.0.dev) on an export's reward and config, inside the verl
environment, from the export root. The fork is not on the package registry: `VRAGRL_SRC` names a checkout of
Alibaba-NLP/VRAG (its `VRAG-RL/` folder holds the fork), put first on the path so `verl` is the fork's.

    VRAGRL_SRC=<checkout> python check_vragrl.py <export root> <tiny model dir> [<export with hf/ for rollouts>]

The export checked is the one made for the fork (`--for vragrl`: verl rows with embedded image bytes, which its
dataset reads); its rollouts come from the SFT records of the same run's full export (the third argument) when
the fork's export holds no `hf/`.

- Config: the fork's own CLI entry (`python -m verl.trainer.main_ppo --config-dir=verl --config-name=vragrl`, Hydra)
  composes the shipped `verl/vragrl.yaml` with the fork's `ppo_trainer` (only the keys its header says a user must
  set on the command line; `--cfg job` prints the composed config and stops): its data files and reward exist under
  the export folder, and `reward_model.reward_manager` is `rm`.
- The fork's `get_custom_reward_fn` (verl/trainer/main_ppo.py) loads the composed `custom_reward_function`
  (reward/vragrl_reward.py), and the fork's reward manager `RMManager` (verl/workers/reward_manager/rm.py, the only
  one its trainer accepts) scores, with it, a `DataProto` holding for every row of the export's verl parquet a right
  rollout and the same rollout with a wrong final answer (rollouts.py), tokenized with the tiny tokenizer, with
  `extra_info` as the fork's training loop rebuilds it ({file_name, reference_page, question, answer}: ray_trainer.py)
  and `retrievaled_images` naming the row's gold pages as its search would. Both modes: training (0.7 x judge +
  0.1 x our float + 0.2 x NDCG) and validation (the judge's verdict, on the row's own `extra_info`). Right must
  outscore wrong on every row.
- The fork's judge (`reward_model.rm_url`) is a local HTTP stand-in speaking the fork's protocol (it reads
  `output.content` of the reply): it answers `<judge>True</judge>` when the rule scorer of the export's own reward
  bundle accepts the generated answer against the reference. No model judge can run here.
- Not the fork's code as released, and why: rm.py has a backslash followed by a space at two line ends (a
  SyntaxError on every Python version); the fork's `verl/` and `vrag_agent/` are copied and those trailing spaces are dropped.
- The fork's own `RLHFDataset`, built from the composed config as its trainer builds it (ray_trainer.py), on the
  train and the validation files: every row survives its length filter and every item tokenizes, with its images
  opened from the embedded bytes (the only form its dataset reads). The tasks whose questions the training items'
  token ids hold are reported (`splits`); the test asserts none is a held-out test task.
Prints one JSON line of counts.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

FORK = Path(os.environ["VRAGRL_SRC"]) / "VRAG-RL"
_COPY = Path(tempfile.mkdtemp(prefix="vragrl-fork-"))
for part in ("verl", "vrag_agent"):  # the fork's trainer imports its agent loop beside it
    shutil.copytree(FORK / part, _COPY / part)
_RM = _COPY / "verl" / "workers" / "reward_manager" / "rm.py"
_RM.write_text(re.sub(r"\\[ \t]+\n", "\\\n", _RM.read_text()))  # the whitespace fix named above, nothing else
sys.path.insert(0, str(_COPY))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoProcessor, AutoTokenizer  # noqa: E402

import verl  # noqa: E402
import splits  # noqa: E402
from rollouts import right_and_wrong, sft_rollouts  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.main_ppo import get_custom_reward_fn  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.reward_manager.rm import RMManager  # noqa: E402

assert Path(verl.__file__).is_relative_to(_COPY), f"verl is not the fork: {verl.__file__}"
MODEL_KEY = "actor_rollout_ref.model.path"
USER_KEYS = (MODEL_KEY, "trainer.n_gpus_per_node", "trainer.nnodes", "data.train_batch_size",
             "actor_rollout_ref.actor.ppo_mini_batch_size", "reward_model.rm_url", "reward_model.rm_key",
             "reward_model.rm_model_name")


class Judge(http.server.BaseHTTPRequestHandler):
    """The fork's judge protocol: POST {"model", "messages"} -> {"output": {"content": "<judge>...</judge>"}}."""

    answer_correct = None
    asked = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"]
        ref = text.split("## Reference Answer\n", 1)[1].split("\n\n## Generated Answer", 1)[0].strip()
        gen = text.split("## Generated Answer\n", 1)[1].split("\n\nYour response", 1)[0].strip()
        assert "<answer>" not in ref and "<evidence>" not in ref, f"the judge's reference is a tagged target: {ref[:80]!r}"
        ok = Judge.answer_correct(gen, ref) >= 0.5
        type(self).asked += 1
        reply = json.dumps({"output": {"content": f"<judge>{ok}</judge>"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


def hydra_config(keys: list[str]):
    import subprocess

    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[2:]; "
                           "import runpy; runpy.run_module('verl.trainer.main_ppo', run_name='__main__')", str(_COPY),
                           "main_ppo", "--config-dir=verl", "--config-name=vragrl", *keys, "--cfg", "job"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"the fork's main_ppo --config-name=vragrl: {proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"[a-z_][a-z0-9_]*:( |$)", line))
    return OmegaConf.create("\n".join(lines[start:]))


def fork_dataset(cfg, files, tokenizer, processor) -> RLHFDataset:
    """The fork's dataset on `files`, with the arguments its trainer passes (ray_trainer.py `_create_dataloader`)."""
    return RLHFDataset(parquet_files=list(files), tokenizer=tokenizer, processor=processor,
                       prompt_key=cfg.data.prompt_key, image_key=cfg.data.get("image_key", "images"),
                       max_prompt_length=cfg.data.max_prompt_length, filter_prompts=True,
                       cache_dir=tempfile.mkdtemp(prefix="fork-cache-"),
                       return_raw_chat=cfg.data.get("return_raw_chat", False),
                       truncation=cfg.data.get("truncation", "error"),
                       filter_overlong_prompts=cfg.data.filter_overlong_prompts)


def batch(rows: list[dict], tokenizer, eval_mode: bool) -> DataProto:
    """One DataProto as the fork's trainer hands it to its reward manager (left-padded prompts, right-padded responses)."""
    prompts = [tokenizer(r["prompt_text"], add_special_tokens=False)["input_ids"] or [0] for r in rows]
    responses = [tokenizer(r["response"], add_special_tokens=False)["input_ids"] for r in rows]
    pl, rl = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id or 0
    p_ids = torch.tensor([[pad] * (pl - len(p)) + p for p in prompts])
    r_ids = torch.tensor([r + [pad] * (rl - len(r)) for r in responses])
    mask = torch.tensor([[0] * (pl - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (rl - len(r)) for p, r in zip(prompts, responses)])
    extra = [r["extra_info"] if eval_mode else {"file_name": r["file_name"], "reference_page": np.array(r["reference_page"]),
                                                "question": r["extra_info"]["question"], "answer": r["extra_info"]["answer"]}
             for r in rows]
    non = {"reward_model": np.array([{"ground_truth": r["ground_truth"], "style": "rule"} for r in rows], dtype=object),
           "data_source": np.array([r["data_source"] for r in rows], dtype=object),
           "extra_info": np.array(extra, dtype=object),
           "retrievaled_images": np.array([[f"/search/pages/{p}.jpg" for p in r["gold_pages"]] for r in rows] + [None], dtype=object)[:-1]}
    return DataProto.from_dict(tensors={"prompts": p_ids, "responses": r_ids, "attention_mask": mask}, non_tensors=non)


def check(root: Path, model_dir: Path, rollout_source: Path | None = None) -> dict:
    os.chdir(root)
    os.environ["VRAG_REWARD_JUDGE"] = "rules"  # our own judge is never asked under the fork: its manager judges
    head = (root / "verl" / "vragrl.yaml").read_text().split("\ndefaults:")[0]
    for key in USER_KEYS:
        assert key in head, f"verl/vragrl.yaml does not name {key} in its header"
    bare = hydra_config([])
    n_train = sum(pq.ParquetFile(f).metadata.num_rows for f in bare.data.train_files)
    cfg = hydra_config([f"{MODEL_KEY}={model_dir}", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
                        f"data.train_batch_size={n_train}", f"actor_rollout_ref.actor.ppo_mini_batch_size={n_train}",
                        "reward_model.rm_url=http://127.0.0.1:1/judge", "reward_model.rm_key=EMPTY",
                        "reward_model.rm_model_name=judge"])
    assert cfg.reward_model.reward_manager == "rm" and cfg.actor_rollout_ref.model.path == str(model_dir)
    files = [*cfg.data.train_files, *(f for f in cfg.data.val_files if f not in cfg.data.train_files)]
    missing = [p for p in [*files, cfg.custom_reward_function.path] if not (root / p).is_file()]
    assert not missing, f"the composed config names files the export lacks: {missing}"
    compute_score = get_custom_reward_fn(cfg)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = AutoProcessor.from_pretrained(model_dir)
    held = splits.load()
    found, n_items, n_images = [], 0, 0
    for part in ("train_files", "val_files")[:2 if list(cfg.data.val_files) != list(cfg.data.train_files) else 1]:
        ds = fork_dataset(cfg, cfg.data[part], tokenizer, processor)
        n_rows = sum(len(pd.read_parquet(f)) for f in cfg.data[part])
        assert len(ds) == n_rows, f"the fork's dataset kept {len(ds)} of {n_rows} rows of {part}"
        for i in range(len(ds)):
            item = ds[i]
            n_items += 1
            n_images += len((item.get("multi_modal_data") or {}).get("image", []))
            if part == "train_files" and held:
                found.append(splits.tasks_in(tokenizer.decode(item["input_ids"][item["attention_mask"].bool()]), held))

    sys.path.insert(0, str(root / "reward"))
    from vrag_reward.rewards.answer import answer_correct  # the bundle's rule scorer stands in for the judge

    Judge.answer_correct = staticmethod(answer_correct)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/judge"
    sft = sft_rollouts(rollout_source or root)
    rows, how = [], {}
    for f in files:
        for r in pq.read_table(f).to_pylist():
            gt = r["reward_model"]["ground_truth"]
            right, wrong, src = right_and_wrong(r["extra_info"]["task_id"], gt, sft)
            how[src] = how.get(src, 0) + 1
            stem = r["file_name"].split(".pdf")[0]
            base = {"prompt_text": r["extra_info"]["question"], "ground_truth": gt, "data_source": r["data_source"],
                    "extra_info": r["extra_info"], "file_name": r["file_name"], "reference_page": r["reference_page"],
                    "gold_pages": [f"{stem}_{p}" for p in r["reference_page"]], "id": r["id"]}
            rows += [{**base, "response": right}, {**base, "response": wrong}]
    out = {}
    for mode in ("train", "validation"):
        manager = RMManager(tokenizer=tokenizer, num_examine=0, compute_score=compute_score, eval_mode=mode == "validation",
                            rm_workers_num=1, rm_url=url, rm_key="EMPTY", rm_model_name="judge")
        scores = manager(batch(rows, tokenizer, mode == "validation")).sum(-1).tolist()
        for i in range(0, len(rows), 2):
            assert scores[i] > scores[i + 1], f"{mode} {rows[i]['id']}: right {scores[i]} <= wrong {scores[i + 1]}"
        out[mode] = {"right_mean": sum(scores[::2]) / (len(rows) // 2), "wrong_mean": sum(scores[1::2]) / (len(rows) // 2)}
    server.shutdown()
    return {"consumer": "vragrl", "fork_version": verl.__version__, "splits": splits.report(found, held),
            "dataset_items": n_items, "dataset_images": n_images, "rows": len(rows) // 2, "rewards_checked": len(rows) // 2,
            "judge_requests": Judge.asked, "rollouts": how, "modes": out, "config": "verl/vragrl.yaml"}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(),
                           Path(sys.argv[3]).resolve() if len(sys.argv) > 3 else None)))
