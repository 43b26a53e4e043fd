"""Environment micro-benchmarks: action parsing, geometry, crop rendering + JPEG encoding on real pages.

    .venv/bin/python bench/bench_env.py [--corpus ../shared/corpus]

Prints a markdown table; results are recorded in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from vrag_data.env.actions import parse_action
from vrag_data.env.geometry import ResizeRule, crop_box, smart_resize
from vrag_data.env.images import PageCache, encode_jpeg, render_image_ref
from vrag_data.env.sanitize import sanitize_text
from vrag_data.schema.records import ImageRef
from vrag_data.store.workspace import Workspace

MESSAGES = [
    ("vrag_rl", "<think>" + "The revenue table should be on the segment page. " * 8 + "</think>\n<search>segment revenue 2023</search>"),
    ("visor", "<think>" + "Cloud revenue is 40 in the top table. " * 8 + "</think>\n<bbox>[120, 340, 610, 720]</bbox>"),
    ("unidoc_rl", "<think>The second candidate shows the table.</think><select>[2, 3]</select>"),
    ("evisrag", "<observe>" + "Image 1 is a cover. " * 10 + "</observe><evidence>\n[1]: no relevant information\n[2]: cloud 40\n[3]: no relevant information\n</evidence><think>Image 2.</think><answer>40</answer>"),
    ("mmdoc_r1", 'Need pages.\n<read>[{"page_ids": [4, 5, 8], "query": "segment revenue"}]</read>'),
    ("json", '{"think": "need the table", "search": "segment revenue 2023"}'),
]


def per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus"))
    args = ap.parse_args()
    rows: list[tuple[str, str]] = []
    for g, text in MESSAGES:
        rows.append((f"parse_action {g} ({len(text)} chars)", f"{per_call(lambda: parse_action(text, g), 5000) * 1e6:.1f} µs"))
    rnd = random.Random(0)
    garbage = "".join(rnd.choice("<>/[]{}abc think search answer \n") for _ in range(65_000))
    rows.append(("parse_action 65 KB tag soup", f"{per_call(lambda: parse_action(garbage, 'vrag_rl'), 50) * 1e3:.2f} ms"))
    huge = "x" * 1_000_000
    rows.append(("parse_action 1 MB (rejected by length)", f"{per_call(lambda: parse_action(huge, 'vrag_rl'), 200) * 1e6:.1f} µs"))
    sizes = [(rnd.randint(100, 6000), rnd.randint(100, 6000)) for _ in range(10_000)]
    t = time.perf_counter()
    for h, w in sizes:
        smart_resize(h, w)
    rows.append(("smart_resize", f"{(time.perf_counter() - t) / len(sizes) * 1e6:.2f} µs"))
    rows.append(("crop_box (qwen2.5-vl)", f"{per_call(lambda: crop_box([100, 200, 500, 600], 'qwen2.5-vl', (1224, 1584), (868, 1120)), 20000) * 1e6:.2f} µs"))
    page_text = ("Revenue <answer>42</answer> table " * 200)[:6000]
    rows.append(("sanitize_text 6 KB page text", f"{per_call(lambda: sanitize_text(page_text), 2000) * 1e6:.1f} µs"))

    corpus = Path(args.corpus)
    pdfs = sorted((corpus / "docs").glob("*.pdf"))[:1] if corpus.is_dir() else []
    if pdfs:
        import pymupdf

        ws = Workspace(tempfile.mkdtemp(prefix="bench-env-")).makedirs()
        ids = []
        with pymupdf.open(pdfs[0]) as doc:
            for n in range(1, min(doc.page_count, 8) + 1):
                pix = doc[n - 1].get_pixmap(dpi=144)
                pid = f"{pdfs[0].stem}_{n}"
                pix.pil_save(ws.page_image(pid), quality=85)
                ids.append((pid, pix.width, pix.height))
        cold = PageCache(size=1)
        rows.append(("decode page JPEG (144 dpi, uncached)", f"{per_call(lambda: [cold.get(ws, p) for p, _, _ in ids], 5) / len(ids) * 1e3:.1f} ms"))
        rule = ResizeRule()

        def crop_and_encode() -> None:
            for pid, w, h in ids:
                r = crop_box([100, 150, 600, 500], "qwen2.5-vl", (w, h), rule.display_size(w, h))
                img = render_image_ref(ws, ImageRef(page_id=pid, box=r.region), max_pixels=401_408)
                encode_jpeg(img)

        crop_and_encode()  # warm the page cache
        rows.append(("crop + resize (<=401,408 px) + JPEG q90, cached page", f"{per_call(crop_and_encode, 5) / len(ids) * 1e3:.1f} ms"))

        def page_encode() -> None:
            for pid, _, _ in ids:
                encode_jpeg(render_image_ref(ws, ImageRef(page_id=pid), max_pixels=1_003_520))

        rows.append(("whole page resized (<=1,003,520 px) + JPEG q90", f"{per_call(page_encode, 3) / len(ids) * 1e3:.1f} ms"))
        rows.append(("corpus file", pdfs[0].name))
    print("| measurement | per call |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    print(json.dumps({"rows": len(rows)}))


if __name__ == "__main__":
    main()
