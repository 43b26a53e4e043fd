"""Run VRAG-RL's own rollout step (its `vrag_agent`, beside its verl fork) against the pages a moved export ships,
served by `vrag-data serve-search -w <export>/search` on 127.0.0.1 (inside the verl environment, from the export
root; the fork set up as in check_vragrl.py).

    VRAGRL_SRC=<checkout> SEARCH_URL=http://127.0.0.1:<port>/search python check_vragrl_search.py <export root> <tiny model dir>

For every verl row: the fork's `LLMGenerationManager.execute_predictions` turns a turn `<search>question</search>`
into its GET /search request (`queries` only, as its rollout sends them), and its `_process_next_obs` opens the first
hit not shown before as a local path, resizes it and writes its image tokens: the observation a policy trains on.
Every row must get one image, opened from the export's `search/pages/`; the pages it retrieved (file names, the form
the fork's reward manager scores NDCG on) are counted against the row's gold pages, and every gold page must be
a file of `search/pages/` (what a rollout could retrieve). Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import check_vragrl  # noqa: F401  - puts the fork (verl + vrag_agent, whitespace-fixed) first on the path
import pyarrow.parquet as pq
from transformers import AutoProcessor

from vrag_agent.generation import GenerationConfig, LLMGenerationManager


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    rows = [r for f in sorted((root / "verl").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert rows, f"{root}: no verl rows"
    processor = AutoProcessor.from_pretrained(model_dir)
    manager = LLMGenerationManager(processor=processor, actor_rollout_wg=None, is_validation=False,
                                   config=GenerationConfig(max_turns=2, max_prompt_length=8192, num_gpus=1,
                                                           search_url=os.environ["SEARCH_URL"]))
    turns = [f"<think>I need the page.</think><search>{r['extra_info']['question']}</search>" for r in rows]
    next_obs, dones = manager.execute_predictions(turns, processor.tokenizer.pad_token, active_mask=[True] * len(rows))
    assert dones == [0] * len(rows), dones
    manager.retrievaled_images = [[] for _ in rows]  # as its run_llm_loop starts a batch
    _, obs_text, images, _ = manager._process_next_obs(next_obs, None)
    pages = (root / "search" / "pages").resolve()
    gold_hits, gold_missing = 0, []
    for row, shown, data, text in zip(rows, manager.retrievaled_images, images, obs_text):
        assert len(shown) == 1 and len(data["image"]) == 1 and data["image"][0].size[0] > 0, (row["id"], shown)
        assert Path(shown[0]).resolve().parent == pages, f"{row['id']}: {shown[0]} is not a page of the export"
        assert text.count("<|vision_start|>") == 1
        stem = row["file_name"].split(".pdf")[0]
        gold = {f"{stem}_{p}" for p in row["reference_page"]}
        gold_hits += Path(shown[0]).stem in gold
        gold_missing += [g for g in sorted(gold) if not (pages / f"{g}.jpg").is_file()]
    return {"consumer": "vragrl-rollout", "rows": len(rows), "images_shown": sum(len(s) for s in manager.retrievaled_images),
            "gold_first_hits": gold_hits, "gold_pages_missing": gold_missing}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
