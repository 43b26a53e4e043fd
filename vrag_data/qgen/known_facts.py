"""Known facts of sample-corpus documents, for the offline oracle writer.

`vrag-data sample-corpus` writes a MANIFEST.json (generator, seed, docs) beside its PDFs and builds every
document deterministically from the seed, so the facts and where each one is drawn can be rebuilt
exactly. A workspace document gets facts only when its source folder holds such a manifest AND the
rebuilt PDF has the same sha256 as the ingested one; any other document has none (the oracle then falls
back to table cells and declines the rest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vrag_data.ids import sha256_bytes
from vrag_data.sample.compose import GOLD_DPI, BuiltDoc
from vrag_data.sample.facts import fmt_int
from vrag_data.schema.records import Document

GENERATOR = "vrag-data sample-corpus"


@dataclass(frozen=True)
class Fact:
    key: str  # the generator's region key, e.g. "table:Revenue:2021"
    entity: str  # the company the fact is about
    page: int  # 1-based
    rect: tuple[float, float, float, float]  # where it is drawn, raw px at `dpi`
    dpi: float
    value: str  # the answer as printed
    number: float | None  # for comparisons and arithmetic
    group: str  # facts of one group are comparable (same quantity and unit)
    label: str  # what tells facts of a group apart: a year, a region, a quarter, a segment
    question: str  # a stand-alone single-hop question
    phrase: str  # the quantity as a noun phrase, for combined questions
    fmt: str  # answer format

    def center(self, dpi: float) -> tuple[float, float]:
        s = dpi / self.dpi
        return ((self.rect[0] + self.rect[2]) / 2 * s, (self.rect[1] + self.rect[3]) / 2 * s)


def facts_of(doc: BuiltDoc) -> list[Fact]:
    """Every fact of a built sample document that has a drawn region."""
    f, regions = doc.facts, doc.regions
    name, last = f.name, f.years[-1]
    out: list[Fact] = []

    def add(key: str, value: str, number: float | None, group: str, label: str, question: str, phrase: str,
            fmt: str = "Int") -> None:
        if key in regions:
            r = regions[key]
            out.append(Fact(key, name, r.page, r.rect, GOLD_DPI, value, number, group, label, question, phrase, fmt))

    for metric in f.table_metrics:
        m = metric if "&" in metric else metric.lower()  # keep "R&D" as printed
        for y in f.years:
            v = f.table[metric][y]
            add(f"table:{metric}:{y}", fmt_int(v), v, f"table:{m}", str(y),
                f"According to its financial table, what was {name}'s {m} in {y}, in USD millions?",
                f"{name}'s {m} in {y} (USD millions)")
    for region, v in f.bar.items():
        add(f"bar:{region}", fmt_int(v), v, f"bar:{f.bar_year}", region,
            f"How many thousand units did {name} sell in {region} in {f.bar_year}?",
            f"the number of units {name} sold in {region} in {f.bar_year} (thousands)")
    for q, v in f.line.items():
        add(f"line:{q}", fmt_int(v), v, "line", q,
            f"How many thousand monthly active users did {name} have in {q}?",
            f"{name}'s monthly active users in {q} (thousands)")
    for seg, v in f.pie.items():
        add(f"pie:{seg}", f"{v}%", v, f"pie:{f.pie_year}", seg,
            f"What share of {name}'s revenue in {f.pie_year} came from the {seg} segment?",
            f"the share of {name}'s {f.pie_year} revenue from the {seg} segment", "Str")
    add("intro:founded", str(f.founded), None, "founded", "", f"In which year was {name} founded?",
        f"the year {name} was founded")
    add("intro:founded", f.hq_city, None, "hq", "", f"In which city is {name} headquartered?",
        f"the city where {name} is headquartered", "Str")
    add("intro:ceo", f.ceo, None, "ceo", "", f"Who is the chief executive of {name}?",
        f"the chief executive of {name}", "Str")
    add("intro:headcount", fmt_int(f.headcount), f.headcount, "headcount", str(last),
        f"How many people did {name} employ at the end of {last}?",
        f"the number of people {name} employed at the end of {last}")
    add("memo:shipments", fmt_int(f.memo_shipments), f.memo_shipments, "shipments", "",
        f"How many shipments did the {f.memo_city} warehouse of {name} handle in {f.memo_month} {last}?",
        f"the shipments handled by {name}'s {f.memo_city} warehouse in {f.memo_month} {last}")
    add("memo:audit", str(f.memo_audit_score), f.memo_audit_score, "audit", "",
        f"What score out of 100 did the quality audit of {name}'s {f.memo_city} site give?",
        f"the quality audit score of {name}'s {f.memo_city} site (out of 100)")
    return out


_BUILT: dict[tuple[int, int], list[BuiltDoc]] = {}  # (docs, seed) -> built documents, once per process


def _manifest(folder: Path) -> dict | None:
    path = folder / "MANIFEST.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("generator") == GENERATOR else None


def load_known_facts(docs: list[Document]) -> dict[str, list[Fact]]:
    """stem -> facts, for the documents that are byte-identical to a rebuildable sample document."""
    from vrag_data.sample.corpus import build_documents  # building costs ~1 s per document: only when needed

    out: dict[str, list[Fact]] = {}
    for d in docs:
        if "://" in d.source_path:
            continue
        man = _manifest(Path(d.source_path).parent)
        if man is None:
            continue
        try:
            key = (int(man["docs"]), int(man["seed"]))
        except (KeyError, TypeError, ValueError):
            continue
        if key not in _BUILT:
            _BUILT[key] = build_documents(*key)
        for built in _BUILT[key]:
            if Path(built.file_name).stem == d.stem and sha256_bytes(built.pdf) == d.doc_id:
                out[d.stem] = facts_of(built)
    return out
