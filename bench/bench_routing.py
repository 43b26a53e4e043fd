"""Episode-affine vs least-loaded routing against a prefix-cache simulator (tests/support/prefix_cache_server.py).

For each episode shape, 256 multi-turn episodes run at once through the real TeacherPool over HTTP to 4
simulated replicas (LRU prefix cache per replica, blocks of 16 tokens, images at their Qwen2.5-VL token cost).
Each turn re-sends the whole, growing history (page images included), like the recipes do; some shapes add a
side request per turn that shares the episode's prefix (a judge / self-check call). We report, per routing:
  * hit ratio: cached prompt tokens over the ideal (every block seen before anywhere is cached, no eviction),
  * simulated GPU-seconds per trajectory (prefill per uncached token + decode per output token),
  * load spread: max / min busy seconds over the replicas.
The shapes are synthetic stand-ins with the turn / image structure of the recipes (they do not call the
recipes' builders).

Run: .venv/bin/python bench/bench_routing.py [--episodes 256] [--replicas 4] [--cache-tokens 500000]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PIL import Image  # noqa: E402

from tests.support.prefix_cache_server import PrefixCacheFleet  # noqa: E402
from vrag_data.config import EndpointConfig, RoleConfig, SamplingConfig  # noqa: E402
from vrag_data.schema.records import ImageRef, Message  # noqa: E402
from vrag_data.teacher import RequestCache, TeacherPool  # noqa: E402


@dataclass(frozen=True)
class Shape:
    name: str
    turns: int
    pages_per_turn: int  # whole pages shown per turn
    crops_per_turn: int  # crops shown per turn
    text_per_turn: int  # bytes of text observation per turn
    side_requests: bool  # a side call per turn sharing the prefix


PAGE = (784, 1008)  # 28 x 36 = 1008 visual tokens
CROP = (336, 336)  # 12 x 12 = 144 visual tokens
SHAPES = [
    Shape("search+crop (vrag_rl-like)", 5, 1, 1, 200, False),
    Shape("two pages per turn (evisrag-like)", 3, 2, 0, 300, True),
    Shape("text search, page at the end (mmdoc_r1-like)", 5, 0, 0, 2000, False),
    Shape("stacked crops (unidoc_rl-like)", 4, 1, 1, 200, True),
    Shape("crop chains (visor-like)", 6, 0, 1, 150, False),
]


def loader(ref: ImageRef, **_: object) -> bytes:
    w, h = (int(x) for x in ref.page_id.rsplit("_", 1)[1].split("x"))
    shade = sum(ref.page_id.encode()) % 200 + 20
    buf = io.BytesIO()
    Image.new("L", (w, h), shade).save(buf, "JPEG", quality=70)
    return buf.getvalue()


def episode_messages(shape: Shape, e: int, upto: int) -> list[Message]:
    msgs = [Message(role="system", text="You answer questions about documents by searching pages. " * 8),
            Message(role="user", text=f"Question {e}: what does the filing report for the segment? " * 3)]
    for t in range(upto):
        msgs.append(Message(role="assistant", text="<search>next page</search>"))
        imgs = [ImageRef(page_id=f"e{e}t{t}p{k}_{PAGE[0]}x{PAGE[1]}") for k in range(shape.pages_per_turn)]
        imgs += [ImageRef(page_id=f"e{e}t{t}c{k}_{CROP[0]}x{CROP[1]}") for k in range(shape.crops_per_turn)]
        if shape.name.startswith("text search") and t == shape.turns - 1:  # the page shown at the last step
            imgs.append(ImageRef(page_id=f"e{e}t{t}final_{PAGE[0]}x{PAGE[1]}"))
        msgs.append(Message(role="user", text=f"<result turn={t} episode={e}> " + "x" * shape.text_per_turn, images=imgs))
    return msgs


async def run_shape(shape: Shape, args: argparse.Namespace, affine: bool) -> dict[str, object]:
    with PrefixCacheFleet(replicas=args.replicas, cache_tokens=args.cache_tokens, time_scale=args.time_scale,
                          output_tokens=args.output_tokens) as fleet, tempfile.TemporaryDirectory() as tmp:
        role = RoleConfig(endpoints=[EndpointConfig(base_url=u, model="teacher", max_in_flight=256) for u in fleet.base_urls],
                          sampling=SamplingConfig(max_tokens=args.output_tokens))
        pool = TeacherPool({"policy": role}, RequestCache(Path(tmp)), "bench")

        async def episode(e: int) -> None:
            key = f"ep{e}" if affine else None
            rng = random.Random(e)
            for t in range(shape.turns):
                await asyncio.sleep(rng.uniform(0, args.tool_s))  # the environment's step (search, crop) takes time
                msgs = episode_messages(shape, e, t)
                await pool.chat("policy", msgs, image_loader=loader, affinity=key)
                if shape.side_requests:
                    await pool.chat("policy", msgs + [Message(role="user", text="Check the last step.")], image_loader=loader, affinity=key)

        t0 = time.perf_counter()
        c0 = time.process_time()
        async with pool:
            await asyncio.gather(*(episode(e) for e in range(args.episodes)))
            aff = pool.stats()["affinity"]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        st = fleet.stats()
    busy = [r["busy_s"] for r in st["replicas"]]
    return {
        "shape": shape.name, "routing": "affine" if affine else "least-loaded",
        "hit_vs_ideal": round(st["cached_tokens"] / max(1, st["ideal_cached_tokens"]), 3),
        "ideal_hit_ratio": round(st["ideal_cached_tokens"] / max(1, st["prompt_tokens"]), 3),
        "gpu_s_per_traj": round(st["busy_s"] / args.episodes, 3),
        "prefill_tokens_per_traj": round((st["prompt_tokens"] - st["cached_tokens"]) / args.episodes),
        "output_tokens_per_traj": round(sum(r["output_tokens"] for r in st["replicas"]) / args.episodes),
        "load_max_min": round(max(busy) / max(1e-9, min(busy)), 3),
        "requests": sum(r["requests"] for r in st["replicas"]), "moves": aff["moves"],
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
    }


PREFILL_S = 1 / 10_000  # the fleet's default GPU-s per uncached prompt token
DECODE_COSTS = (1e-3, 5e-4, 2e-4, 1e-4)  # GPU-s per output token: from one request alone to a well-batched decode


def decode_sensitivity(ll: dict[str, object], af: dict[str, object]) -> dict[str, float]:
    """Affine / least-loaded GPU-seconds per trajectory for other decode costs, from the same run's token counts
    (decode is not cacheable, so its share decides how much of the prefill saving reaches the total)."""
    def gpu(r: dict[str, object], d: float) -> float:
        return float(r["prefill_tokens_per_traj"]) * PREFILL_S + float(r["output_tokens_per_traj"]) * d  # type: ignore[arg-type]

    return {f"{d:g}": round(gpu(af, d) / gpu(ll, d), 3) for d in DECODE_COSTS}


async def main_async(args: argparse.Namespace) -> None:
    for shape in SHAPES:
        if args.shape and args.shape not in shape.name:
            continue
        ll = await run_shape(shape, args, affine=False)
        af = await run_shape(shape, args, affine=True)
        print(json.dumps(ll))
        print(json.dumps(af))
        print(json.dumps({"shape": shape.name, "gpu_s_affine_over_least_loaded": round(af["gpu_s_per_traj"] / ll["gpu_s_per_traj"], 3),
                          "prefill_affine_over_least_loaded": round(af["prefill_tokens_per_traj"] / ll["prefill_tokens_per_traj"], 3),
                          "gpu_s_ratio_by_decode_s": decode_sensitivity(ll, af)}))
        sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--cache-tokens", type=int, default=500_000, help="prefix-cache budget per replica")
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--time-scale", type=float, default=0.02, help="wall seconds per simulated GPU-second")
    ap.add_argument("--tool-s", type=float, default=0.05, help="max wall seconds of an environment step (uniform)")
    ap.add_argument("--shape", default="", help="run only shapes whose name contains this")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
