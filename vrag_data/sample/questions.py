"""Questions over the synthetic corpus, in the row format of the shared corpus `qa.jsonl`.

Single-hop questions point at one region (a table cell, a chart value label, a sentence, a sentence on a
scanned page); multi-hop ones need two pages of one document or two documents. Each evidence box is
{"page", "bbox", "dpi", "source", "doc", "text"}: `bbox` in raw pixels at `dpi`, `text` the words visible
in the box. Cross-document rows keep `doc_id` = the first document and list all of them in
`extra.doc_ids`, with `extra.evidence_docs` naming the document of each entry of `evidence_pages`.
"""

from __future__ import annotations

import random
from typing import Any

from vrag_data.sample.canvas import Region
from vrag_data.sample.compose import GOLD_DPI, BuiltDoc
from vrag_data.sample.facts import fmt_int

Row = dict[str, Any]


def _box(doc: BuiltDoc, region: Region) -> dict[str, Any]:
    w, h = doc.page_px[region.page - 1]
    x1, y1, x2, y2 = region.rect
    bbox = [round(max(0.0, x1), 1), round(max(0.0, y1), 1), round(min(float(w), x2), 1), round(min(float(h), y2), 1)]
    return {"page": region.page, "bbox": bbox, "dpi": GOLD_DPI, "source": region.source, "doc": doc.file_name,
            "text": region.text}


def _row(question: str, answer: str, fmt: str, parts: list[tuple[BuiltDoc, str]], kind: str) -> Row:
    """`parts` = (document, region key) per piece of evidence, in reading order."""
    boxes = [_box(d, d.regions[k]) for d, k in parts]
    docs = list(dict.fromkeys(d.file_name for d, _ in parts))
    sources = list(dict.fromkeys(d.regions[k].source for d, k in parts))
    first = parts[0][0]
    extra: dict[str, Any] = {"kind": kind, "evidence_boxes": boxes}
    if len(docs) > 1:
        extra["doc_ids"] = docs
        extra["evidence_docs"] = [d.file_name for d, _ in parts]
    pages = [d.regions[k].page for d, k in parts]
    if len(docs) == 1:
        pages = sorted(set(pages))
    return {"question": question, "answer": answer, "evidence_pages": pages, "evidence_sources": sources,
            "answer_format": fmt, "doc_id": first.file_name, "doc_type": first.style.doc_type, "extra": extra}


def single_doc_questions(doc: BuiltDoc, rng: random.Random) -> list[Row]:
    f = doc.facts
    name, last = f.name, f.years[-1]
    rows: list[Row] = []
    for metric, year in rng.sample([(m, y) for m in f.table_metrics for y in f.years], 2):
        cell = fmt_int(f.table[metric][year])
        rows.append(_row(f"According to the financial table of {name}, what was its {metric.lower()} in {year}, "
                         "in USD millions?", cell, "Int", [(doc, f"table:{metric}:{year}")], "table_cell"))
    if "bar" in f.charts:
        region = rng.choice(list(f.bar))
        rows.append(_row(f"According to the bar chart of {name}, how many thousand units did it sell in {region} "
                         f"in {f.bar_year}?", fmt_int(f.bar[region]), "Int", [(doc, f"bar:{region}")], "chart_value"))
    if "line" in f.charts:
        q = rng.choice(list(f.line))
        rows.append(_row(f"How many thousand monthly active users did {name} have in {q}?", fmt_int(f.line[q]),
                         "Int", [(doc, f"line:{q}")], "chart_value"))
    if "pie" in f.charts:
        seg = rng.choice(list(f.pie))
        rows.append(_row(f"What share of {name}'s revenue in {f.pie_year} came from the {seg} segment?",
                         f"{f.pie[seg]}%", "Str", [(doc, f"pie:{seg}")], "chart_value"))
    para = [
        (f"In which year was {name} founded?", str(f.founded), "Int", "intro:founded"),
        (f"In which city is {name} headquartered?", f.hq_city, "Str", "intro:founded"),
        (f"Who is the chief executive of {name}?", f.ceo, "Str", "intro:ceo"),
        (f"How many people did {name} employ at the end of {last}?", fmt_int(f.headcount), "Int", "intro:headcount"),
    ]
    for q, a, fmt, key in rng.sample(para, 2):
        rows.append(_row(q, a, fmt, [(doc, key)], "paragraph_fact"))
    if f.has_scan:
        rows.append(_row(f"How many shipments did the {f.memo_city} warehouse of {name} handle in {f.memo_month} "
                         f"{last}?", fmt_int(f.memo_shipments), "Int", [(doc, "memo:shipments")], "scanned_fact"))
        rows.append(_row(f"What score out of 100 did the quality audit of {name}'s {f.memo_city} site give?",
                         str(f.memo_audit_score), "Int", [(doc, "memo:audit")], "scanned_fact"))
    per_emp = f.table["Revenue"][last] * 1000 / f.headcount  # USD millions / people -> USD thousands each
    rows.append(_row(f"Using the revenue in its financial table and its headcount at the end of {last}, what was "
                     f"{name}'s revenue per employee in {last}, in thousand USD rounded to one decimal?",
                     f"{per_emp:.1f}", "Float", [(doc, f"table:Revenue:{last}"), (doc, "intro:headcount")],
                     "multi_page"))
    return rows


def cross_doc_questions(a: BuiltDoc, b: BuiltDoc, rng: random.Random, variant: int) -> list[Row]:
    fa, fb = a.facts, b.facts
    if variant % 2 == 0:
        common = [y for y in fa.years if y in fb.years and fa.table["Revenue"][y] != fb.table["Revenue"].get(y)]
        if not common:
            return []
        y = rng.choice(common)
        winner = fa.name if fa.table["Revenue"][y] > fb.table["Revenue"][y] else fb.name
        return [_row(f"Which company reported the higher revenue in {y}: {fa.name} or {fb.name}?", winner, "Str",
                     [(a, f"table:Revenue:{y}"), (b, f"table:Revenue:{y}")], "cross_doc")]
    total = fa.headcount + fb.headcount
    return [_row(f"How many people did {fa.name} and {fb.name} employ together at the end of {fa.years[-1]}?",
                 fmt_int(total), "Int", [(a, "intro:headcount"), (b, "intro:headcount")], "cross_doc")]


def unanswerable_question(doc: BuiltDoc) -> Row:
    f = doc.facts
    return {"question": f"What was {f.name}'s revenue in {f.years[0] - 3}?", "answer": "Not answerable",
            "evidence_pages": [], "evidence_sources": [], "answer_format": "None", "doc_id": doc.file_name,
            "doc_type": doc.style.doc_type, "extra": {"kind": "unanswerable", "evidence_boxes": []}}
