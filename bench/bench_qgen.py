"""Question synthesis (`tasks generate`): yield, teacher calls per kept task, and the distribution over
kinds, reasoning types and evidence sources.

1. the offline oracle writer on the sample corpus (real ingest: layout model, find_tables, RapidOCR);
2. the model path against the scripted local OpenAI-compatible server playing question_writer, answerer
   and judge, with a fixed share of bad writer replies (invalid JSON, names the document, ambiguous,
   answerable closed-book) and `--latency` seconds per request.

    .venv/bin/python -m bench.bench_qgen --docs 6 --n 40 --latency 0.2 [--work /tmp/qgen-bench]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.openai_server import Faults, OpenAIServer
from vrag_data.config import EndpointConfig, RoleConfig, parse_config
from vrag_data.ingest import IngestOptions, ingest_paths
from vrag_data.qgen import GenerateSummary, generate_tasks
from vrag_data.retrieve import build_index
from vrag_data.rewards.answer import normalize_answer
from vrag_data.sample import make_sample_corpus
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents


def _text(content: Any) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    return " ".join(p["text"] for p in content if p["type"] == "text"), sum(p["type"] == "image_url" for p in content)


class ScriptedRoles:
    """Writer reply i: i % 10 == 0 invalid JSON, 1 names the document, 2 ambiguous, 3 closed-book; else a
    fresh good question. The answerer answers good questions from the first pages it sees only."""

    def __init__(self, stem: str) -> None:
        self.stem, self.i, self.lock = stem, 0, threading.Lock()
        self.gold: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        self.seen: Counter[str] = Counter()

    def writer(self) -> str:
        i, self.i = self.i, self.i + 1
        k = i % 10
        if k == 0:
            return "Here is a question about revenue: what was it in 2020?"
        q, a, kind = {1: (f"What does {self.stem} report as revenue in 2020, case {i}?", "1", "good"),
                      2: (f"What was the revenue in 2020 in the financial figures, case {i}?", "100", "ambiguous"),
                      3: (f"What is the capital of France, case {i}?", "Paris", "closed")}.get(
            k, (f"What was the Zylox unit {i} output in thousand units?", str(1000 + i), "good"))
        self.gold[q], self.kind[q] = a, kind
        return json.dumps({"question": q, "answer": a, "answer_format": "Str", "reasoning_type": "extraction"})

    def __call__(self, req: dict[str, Any]) -> str:
        system = req["messages"][0]["content"]
        user, _ = _text(req["messages"][-1]["content"])
        with self.lock:
            if system.startswith("You write exam questions"):
                return self.writer()
            if system.startswith("You grade"):
                ref = user.split("Reference answer:", 1)[1].split("\n", 1)[0]
                pred = user.split("Assistant's answer:", 1)[1]
                return f"<judge>{normalize_answer(ref) == normalize_answer(pred)}</judge>"
            q = user.removeprefix("Question: ").strip()
            if system.startswith("You answer questions without"):
                return f"<answer>{self.gold[q]}</answer>" if self.kind.get(q) == "closed" else "<answer>no idea</answer>"
            self.seen[q] += 1
            if self.kind.get(q) == "ambiguous" or self.seen[q] == 1:
                return f"<answer>{self.gold.get(q, 'Not answerable')}</answer>"
            return "<answer>Not answerable</answer>"


def _row(label: str, s: GenerateSummary, secs: float) -> str:
    done = s.kept + s.already
    per = f"{s.calls / done:.1f}" if done and s.calls else "0"
    fmt = lambda d: ", ".join(f"{k} {v}" for k, v in d.items()) or "-"  # noqa: E731
    return (f"| {label} | {done}/{s.attempted} = {s.yield_rate:.0%} | {per} ({s.requests} sent) | {fmt(s.by_kind)} | "
            f"{fmt(s.by_type)} | {fmt(s.by_source)} | {fmt(s.rejected)} | {secs:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=6)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="qgen-bench-"))
    ws = Workspace(str(work / "ws"))
    if not load_documents(ws):
        corpus = make_sample_corpus(work / "corpus", docs=args.docs, seed=0)
        t = time.perf_counter()
        ingest_paths([str(p) for p in corpus.paths], ws, IngestOptions(workers=2), progress=False)
        build_index(ws)
        print(f"ingest + index: {time.perf_counter() - t:.1f}s")
    rows = []
    for label, kinds in (("oracle, all kinds", None), ("oracle, single only", ["single"])):
        for f in ("generated.parquet", "generate_rejections.parquet"):
            (Path(ws.tasks) / f).unlink(missing_ok=True)
        t = time.perf_counter()
        s = generate_tasks(ws, n=args.n, kinds=kinds)
        rows.append(_row(label, s, time.perf_counter() - t))
    for f in ("generated.parquet", "generate_rejections.parquet"):
        (Path(ws.tasks) / f).unlink(missing_ok=True)
    script = ScriptedRoles(load_documents(ws)[0].stem)
    with OpenAIServer(reply=script, faults=Faults(latency_s=args.latency), record_bodies=False) as srv:
        cfg = parse_config({"tasks": {"generate": {"concurrency": 8, "seed": int(time.time())}}})  # fresh cache
        cfg.roles["question_writer"] = RoleConfig(endpoints=[EndpointConfig(base_url=srv.base_url, model="teacher")])
        t = time.perf_counter()
        s = generate_tasks(ws, cfg, n=args.n, writer="model")
        rows.append(_row(f"scripted server ({args.latency:g} s/request, 8 attempts in flight)", s, time.perf_counter() - t))
    print("| run | kept / attempted | calls per kept task | kinds | types | sources | rejections | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
