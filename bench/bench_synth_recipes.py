"""Episode-loop cost per recipe: the oracle policy (no model) and the real client against a local scripted
server that answers at once, on a sample workspace. Shows what the loop itself (environment, parsing,
context building, page rendering + JPEG for requests, parquet shards) costs per episode, next to a teacher.

`.venv/bin/python bench/bench_synth_recipes.py [--docs 4] [--samples 4]`
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.openai_server import OpenAIServer  # noqa: E402
from tests.support.scripted_teacher import teacher  # noqa: E402
from tests.support.synth_workspace import cli  # noqa: E402
from vrag_data.config import EndpointConfig, RoleConfig, RunConfig  # noqa: E402
from vrag_data.recipe import recipe_names, resolve_recipe  # noqa: E402

RECIPES = tuple(recipe_names())
from vrag_data.synth.run import synth  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--samples", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cli("sample-corpus", base / "corpus", "--docs", str(a.docs))
        cli("ingest", "-w", base / "ws", base / "corpus", "--ocr", "off", "--quiet")
        cli("tasks", "import", base / "corpus" / "qa.jsonl", "-w", base / "ws")
        cli("index", "-w", base / "ws")
        print("| recipe | policy | episodes | turns/episode | requests | wall s | episodes/s | ms CPU/episode |")
        print("|---|---|---|---|---|---|---|---|")
        for recipe in RECIPES:
            for policy in ("oracle", "model"):
                with OpenAIServer(reply=teacher) as srv:
                    role = RoleConfig(kind="oracle") if policy == "oracle" else RoleConfig(
                        endpoints=[EndpointConfig(base_url=srv.base_url, model="teacher")])
                    side = {r: RoleConfig(same_as="policy") for r in ("grounding", "reader", "planner")}
                    cfg = RunConfig(roles={"policy": role, "judge": RoleConfig(kind="rules"), **side})  # every role named
                    c0, t0 = time.process_time(), time.perf_counter()
                    res = synth(base / "ws", cfg, resolve_recipe(recipe, cfg), run_id=f"bench-{recipe}-{policy}", samples=a.samples, progress=False)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                s = res.stats
                n = s["finished"]
                print(f"| {recipe} | {policy} | {n} | {s['turns'] / max(1, n):.1f} | {s['requests']} | {wall:.1f} | "
                      f"{n / wall:.1f} | {1000 * cpu / max(1, n):.0f} |")


if __name__ == "__main__":
    main()
