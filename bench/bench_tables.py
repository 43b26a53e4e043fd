"""Table structure against hand labels: cell-level precision / recall on real table pages of the shared corpus.

    nice -n 5 .venv/bin/python bench/bench_tables.py [--corpus ../shared/corpus] [--labels bench/data/table_labels.jsonl]

Each label line names a page and a few cell facts read off it by hand: (row label, column header, value), plus the
number of tables on the page where there are several, or `toc: true` for a table of contents / index page. The
tables a page yields as question material (`Page.tables_md`) are read as a grid (first markdown row = column names,
first column = row labels). A label is found when a table has its row (same words, footnote marks aside), a column
whose name holds every word of the label's header (the column with the fewest other words wins) and there the
label's value. Precision counts only cells at a labelled (row, column): a value from the wrong column or a merged row
there is a false positive; recall is found labels / labels. Rows:
  before  the layout model's own cell grid per table region (the ingest path up to this change)
  after   `vrag_data.ingest.tables`: the grid rebuilt from word geometry, stacked tables split, TOCs set aside
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vrag_data.ingest.layout import _table_from_group, analyse_layout  # noqa: E402
from vrag_data.ingest.render import import_pymupdf, open_pdf  # noqa: E402
from vrag_data.ingest.textlayer import extract_text_layer  # noqa: E402

_FOOTNOTE = re.compile(r"\s*\((?:[a-z]|\d{1,2})\)\s*$|(?<=[a-z%])\(\d\)$", re.I)


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9%+$]+", _FOOTNOTE.sub("", text.strip()).lower().replace("–", " "))


def value_key(text: str) -> str:
    return re.sub(r"[\s$]", "", text).lower()


def grid_cells(md: str) -> list[tuple[str, str, str]]:
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in md.splitlines()
            if ln.strip().startswith("|") and not re.fullmatch(r"[|\-:\s]+", ln.strip())]
    if len(rows) < 2:
        return []
    head = rows[0]
    return [(r[0], head[j], r[j]) for r in rows[1:] if len(r) == len(head) for j in range(1, len(head)) if r[j]]


def _extra(col: str, want: set[str]) -> tuple[int, int]:
    extra = set(tokens(col)) - want
    return sum(bool(re.fullmatch(r"(19|20)\d\d", t)) for t in extra), len(extra)


def score_page(label: dict, tables: list[str]) -> dict[str, int]:
    cells = [c for md in tables for c in grid_cells(md)]
    tp = fp = 0
    for row, col, value in label.get("cells", []):
        rk, ck = tokens(row), set(tokens(col))
        # the column with the fewest other years, then fewest other words ("2015" is not "Change 2015 vs. 2014")
        at = [(_extra(c, ck), v) for r, c, v in cells if tokens(r) == rk and ck <= set(tokens(c))]
        if not at:
            continue
        best = min(n for n, _ in at)
        if any(value_key(v) == value_key(value) for n, v in at if n == best):
            tp += 1
        else:
            fp += 1
    return {"tp": tp, "fp": fp, "labels": len(label.get("cells", [])), "tables": len(tables),
            "toc_material": len(tables) if label.get("toc") else 0}


def page_tables(page, words) -> tuple[list[str], list[str]]:  # noqa: ANN001
    lay = analyse_layout(page, words)
    m = page.rotation_matrix if page.rotation else None
    before = [md for g in (page.layout_information or []) if g.get("class_name") == "table"
              for md in [_table_from_group(g, words, m)] if md]
    return before, lay.tables_md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--labels", default=str(REPO / "bench" / "data" / "table_labels.jsonl"))
    ap.add_argument("--show", action="store_true", help="print each page's tables after the change")
    args = ap.parse_args()
    docs = Path(args.corpus) / "docs"
    if not docs.is_dir():
        sys.exit(f"no corpus at {docs}; pass --corpus")
    import_pymupdf(layout=True, layout_threads=1)
    labels = [json.loads(x) for x in Path(args.labels).read_text(encoding="utf-8").splitlines() if x.strip()]
    totals = {k: {"tp": 0, "fp": 0, "labels": 0, "tables_ok": 0, "tables_n": 0, "toc_bad": 0, "toc_n": 0}
              for k in ("before", "after")}
    t0 = time.perf_counter()
    print(f"{'page':44} {'before tp/fp/lab':>17} {'after tp/fp/lab':>16}  tables b/a/label")
    for lab in labels:
        doc = open_pdf(str(docs / lab["doc"]))
        page = doc[lab["page"] - 1]
        words = extract_text_layer(page, want_words=True).words
        got = dict(zip(("before", "after"), page_tables(page, words)))
        line = f"{lab['doc'][:38]} p{lab['page']:<4}"
        for k, tables in got.items():
            s, tot = score_page(lab, tables), totals[k]
            for f in ("tp", "fp", "labels"):
                tot[f] += s[f]
            if "tables" in lab:
                tot["tables_n"] += 1
                tot["tables_ok"] += s["tables"] == lab["tables"]
            if lab.get("toc"):
                tot["toc_n"] += 1
                tot["toc_bad"] += s["toc_material"] > 0
            line += f" {s['tp']:>6}/{s['fp']}/{s['labels']:<6}"
        line += f"   {len(got['before'])}/{len(got['after'])}/{lab.get('tables', '-') if not lab.get('toc') else 'toc'}"
        print(line)
        if args.show:
            print("\n\n".join(got["after"]))
        doc.close()
    print(f"\n{len(labels)} pages, {time.perf_counter() - t0:.1f} s")
    print("| extractor | cells labelled | found (recall) | wrong value at a labelled cell | precision | stacked pages with "
          "the right table count | TOC pages giving question tables |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k, t in totals.items():
        prec = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else 0.0
        print(f"| {k} | {t['labels']} | {t['tp']} ({t['tp'] / max(1, t['labels']):.1%}) | {t['fp']} | {prec:.1%} | "
              f"{t['tables_ok']}/{t['tables_n']} | {t['toc_bad']}/{t['toc_n']} |")


if __name__ == "__main__":
    main()
