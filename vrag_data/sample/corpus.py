"""`make_sample_corpus`: deterministic synthetic PDFs + `qa.jsonl` with gold evidence boxes + MANIFEST.json."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vrag_data.errors import VragError
from vrag_data.ids import sha256_bytes
from vrag_data.sample.compose import GOLD_DPI, BuiltDoc, build_document
from vrag_data.sample.facts import company_names, make_facts
from vrag_data.sample.questions import cross_doc_questions, single_doc_questions, unanswerable_question

MAX_DOCS = 500


@dataclass(frozen=True)
class SampleCorpus:
    paths: list[Path]
    qa_path: Path
    manifest_path: Path
    n_questions: int


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def build_documents(docs: int, seed: int, on_doc: Callable[[BuiltDoc], None] | None = None) -> list[BuiltDoc]:
    """The documents in memory; document i depends only on (seed, i, docs)."""
    rng = random.Random(seed)
    base = rng.randint(2016, 2020)
    years = [base, base + 1, base + 2, base + 3]
    names = company_names(rng, docs)
    built = []
    for i, name in enumerate(names):
        doc_rng = random.Random(seed * 1_000_003 + i)
        kind = "report" if i % 2 == 0 else "slides"
        facts = make_facts(doc_rng, name, kind, years)
        facts.has_scan = i % 3 != 2  # two documents in three carry an image-only memo page
        doc = build_document(facts, f"sample{i:02d}_{_slug(name)}_{kind}.pdf", doc_rng, seed * 101 + i)
        built.append(doc)
        if on_doc is not None:
            on_doc(doc)
    return built


def questions(built: list[BuiltDoc], seed: int) -> list[dict]:
    rng = random.Random(f"questions:{seed}")
    rows: list[dict] = []
    for doc in built:
        rows += single_doc_questions(doc, rng)
    for i in range(len(built) - 1):
        rows += cross_doc_questions(built[i], built[i + 1], rng, i)
    if built:
        rows.append(unanswerable_question(built[0]))
    out = []
    for n, row in enumerate(rows):
        out.append({"id": f"sample-{seed}-{n:04d}", "source_benchmark": "sample", **row})
    return out


def make_sample_corpus(out: Path, docs: int = 6, seed: int = 0,
                       on_doc: Callable[[BuiltDoc], None] | None = None) -> SampleCorpus:
    """Write `docs` synthetic PDFs, `qa.jsonl` and `MANIFEST.json` into `out`. Same seed -> same bytes."""
    if not 1 <= docs <= MAX_DOCS:
        raise VragError(f"--docs must be between 1 and {MAX_DOCS} (got {docs})")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise VragError(f"{out} exists and is not a folder; pick another output folder")
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "MANIFEST.json"
    _remove_previous(out, manifest_path)
    built = build_documents(docs, seed, on_doc)
    paths = []
    files = []
    for doc in built:
        p = out / doc.file_name
        p.write_bytes(doc.pdf)
        paths.append(p)
        files.append({"file": doc.file_name, "sha256": sha256_bytes(doc.pdf), "pages": doc.n_pages,
                      "kind": doc.facts.kind, "company": doc.facts.name, "scanned_pages": doc.scanned_pages})
    rows = questions(built, seed)
    qa_text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    qa_path = out / "qa.jsonl"
    qa_path.write_text(qa_text, encoding="utf-8")
    manifest = {"generator": "vrag-data sample-corpus", "seed": seed, "docs": docs, "gold_dpi": GOLD_DPI,
                "files": files, "qa": {"file": "qa.jsonl", "sha256": sha256_bytes(qa_text.encode()), "rows": len(rows)}}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return SampleCorpus(paths, qa_path, manifest_path, len(rows))


def _remove_previous(out: Path, manifest_path: Path) -> None:
    """Delete only the files an earlier run listed, so a smaller corpus does not leave stale PDFs behind."""
    if not manifest_path.is_file():
        return
    try:
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
        names = [f["file"] for f in old.get("files", [])]
    except (ValueError, KeyError, TypeError):
        return
    for name in names:
        p = out / Path(name).name
        if p.suffix == ".pdf" and p.is_file():
            p.unlink()
