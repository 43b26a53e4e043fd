"""Throughput of the reward entry point and of the default filter chains on synthetic trajectories.

    .venv/bin/python bench/bench_rewards_filters.py --n 10000

Prints compute_score calls/s (verl path, per recipe) and trajectories/s through `apply_chain` for
every recipe's default chain (set-level dedup takes the MinHash path above 2,000 items).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.rewards_factory import make_task, make_traj  # noqa: E402
from vrag_data.filters import FilterContext, apply_chain, default_chain  # noqa: E402
from vrag_data.rewards.verl import compute_score  # noqa: E402
from vrag_data.recipe import get_recipe  # noqa: E402

_rng = random.Random(7)
WORDS = ["".join(_rng.choices("abcdefghijklmnopqrstuvwxyz", k=_rng.randint(3, 9))) for _ in range(3000)]


def build(n: int, seed: int = 0):
    rng = random.Random(seed)
    tasks, trajs = {}, []
    for i in range(n):
        q = " ".join(rng.choices(WORDS, k=8)) + f" {i % (n // 3 + 1)}?"
        gold = f"doc{i % 97}_{rng.randint(1, 30)}"
        t = make_task(question=q, answer=str(rng.randint(1, 999)), pages=[gold], stem=f"doc{i % 97}",
                      boxes={gold: [(100, 100, 500, 400)]})
        tasks[t.task_id] = t
        steps = [("search", q, [f"doc{i % 97}_{rng.randint(1, 30)}", gold])]
        steps += [("search", q, [f"doc{i % 97}_{rng.randint(1, 30)}"]) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.5:
            steps.append(("crop", gold, (100, 120, 480, 420)))
        steps.append(("answer", t.answer if rng.random() < 0.7 else "no idea"))
        trajs.append(make_traj(t, steps, sample=i))
    return tasks, trajs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args()
    tasks, trajs = build(args.n)
    sol = ("<think>a</think><search>q</search>\n<think>b</think><bbox>[100, 100, 300, 300]</bbox>\n"
           "<think>c</think><answer>42.0%</answer>")
    extra = {"gold_pages": ["doc_3"], "gold_boxes": '{"doc_3": [[100, 100, 300, 400]]}', "answer_format": "Float",
             "retrieved_pages": ["doc_1", "doc_3"], "crops": [{"page_id": "doc_3", "box": [100, 100, 300, 300]}]}
    for recipe in ("vrag_rl", "unidoc_rl", "visor", "mmdoc_r1"):
        t0 = time.perf_counter()
        for _ in range(args.n):
            compute_score("rag", sol, "42%", {**extra, "recipe": recipe})
        dt = time.perf_counter() - t0
        print(f"compute_score {recipe}: {args.n / dt:,.0f} calls/s")
    for recipe in ("vrag_rl", "unidoc_rl", "visor", "evisrag", "mmdoc_r1"):
        t0 = time.perf_counter()
        kept, verdicts = apply_chain(trajs, tasks, default_chain(get_recipe(recipe)), FilterContext())
        dt = time.perf_counter() - t0
        print(f"apply_chain {recipe}: {len(trajs) / dt:,.0f} traj/s, kept {len(kept)}/{len(trajs)}, "
              f"{len(verdicts)} verdicts")


if __name__ == "__main__":
    main()
