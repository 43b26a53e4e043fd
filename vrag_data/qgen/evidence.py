"""Pick the evidence a generated question must rest on: layout regions of the ingested pages.

A region is one layout block (table, chart, figure, paragraph, OCR line, heading). An `Evidence` is one
region (`single`), two regions on different pages of one document (`multi_page`) or two regions in
different documents (`cross_doc`). Picking is deterministic for a (seed, attempt) pair.

Ingest stores overlapping blocks from several extractors (text-layer lines, the layout model, find_tables,
OCR); for each page we keep the most structured source and drop blocks that mostly overlap a kept one,
so the writer is not shown the same table twice.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from vrag_data.ingest.backends import block_source_ranks
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.statement_items import item_keys, ratio_pair
from vrag_data.qgen.cells import quantity
from vrag_data.qgen.grid import generic_label, label_key, markdown_rows, table_grid
from vrag_data.schema.records import EvidenceSource, LayoutBlock, Page
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_layout, load_pages

KINDS = ("single", "multi_page", "cross_doc")

# layout class -> evidence source; classes not listed (footer, header, formula, other) are never evidence
CLASS_SOURCE: dict[str, EvidenceSource] = {
    "table": "table", "chart": "chart", "figure": "figure", "text": "text", "list": "text", "ocr_line": "text",
    "title": "layout", "caption": "layout",
}
FEW_TABLES = 3  # table regions a document needs before its running text is left out of the pool
# Visual and tabular regions make better questions than running text; headings the least.
WEIGHT: dict[str, float] = {"table": 3.0, "chart": 3.0, "figure": 2.0, "text": 1.0, "layout": 0.3}
OVERLAP = 0.6  # share of the smaller block inside a kept block that makes it a duplicate


@dataclass(frozen=True)
class Region:
    block: LayoutBlock
    page: Page
    source: EvidenceSource

    @property
    def page_id(self) -> str:
        return self.block.page_id

    @property
    def stem(self) -> str:
        return self.page.stem

    @property
    def text(self) -> str:
        return self.block.text


@dataclass(frozen=True)
class Evidence:
    kind: str  # single | multi_page | cross_doc
    regions: tuple[Region, ...]

    @property
    def page_ids(self) -> list[str]:
        return list(dict.fromkeys(r.page_id for r in self.regions))

    @property
    def stems(self) -> list[str]:
        return list(dict.fromkeys(r.stem for r in self.regions))

    @property
    def sources(self) -> list[EvidenceSource]:
        return list(dict.fromkeys(r.source for r in self.regions))


def _inter(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def _area(a: tuple[float, ...]) -> float:
    return max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])


def page_regions(blocks: list[LayoutBlock], page: Page, min_chars: int) -> list[Region]:
    """The evidence candidates of one page, best extractor first, near-duplicates removed."""
    # A chart or figure may hold no extracted text and still be good evidence for a VLM writer; running
    # text and headings without text are nothing.
    cands = [b for b in blocks if b.cls in CLASS_SOURCE
             and (len(b.text.strip()) >= min_chars or CLASS_SOURCE[b.cls] in ("chart", "figure"))]
    # which extractor wins when two blocks cover the same region: the more structured one, as each layout backend
    # ranks the sources it writes; a source no registered backend declares is an error, never ranked last
    rank = block_source_ranks()
    unknown = sorted({b.source for b in cands} - set(rank))
    if unknown:
        raise ValueError(f"page {page.page_id}: layout blocks from {unknown}, a source no registered layout backend "
                         f"declares (known: {sorted(rank)}); install or register the backend that wrote them")
    cands.sort(key=lambda b: (rank[b.source], -_area(b.bbox.raw), b.block_id))
    kept: list[LayoutBlock] = []
    for b in cands:
        a = _area(b.bbox.raw)
        if a <= 0:
            continue
        if any(_inter(b.bbox.raw, k.bbox.raw) >= OVERLAP * min(a, _area(k.bbox.raw)) for k in kept):
            continue
        kept.append(b)
    return [Region(b, page, CLASS_SOURCE[b.cls]) for b in kept]


@dataclass
class EvidencePool:
    """All candidate regions of a workspace, grouped by document."""

    by_doc: dict[str, list[Region]] = field(default_factory=dict)  # stem -> regions in page order
    # stem -> text of the title blocks on page 1, top first (how docname names a paper without metadata)
    first_titles: dict[str, list[str]] = field(default_factory=dict)
    _links: list[tuple[Region, list[Region]]] | None = field(default=None, repr=False)
    _doc_links: list[tuple[Region, list[Region]]] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, ws: Workspace, sources: list[str], min_chars: int = 2) -> "EvidencePool":
        pages = {p.page_id: p for p in load_pages(ws)}
        blocks: dict[str, list[LayoutBlock]] = defaultdict(list)
        for b in load_layout(ws):
            blocks[b.page_id].append(b)
        by_doc: dict[str, list[Region]] = defaultdict(list)
        titles: dict[str, list[str]] = {}
        for pid in sorted(pages, key=lambda p: (pages[p].stem, pages[p].page)):
            for r in page_regions(blocks.get(pid, []), pages[pid], min_chars):
                if r.source in sources:
                    by_doc[r.stem].append(r)
            if pages[pid].page == 1:
                heads = sorted((b for b in blocks.get(pid, []) if b.cls == "title"), key=lambda b: b.bbox.raw[1])
                titles[pages[pid].stem] = [b.text for b in heads]
        return cls(dict(by_doc), titles)

    def restrict(self, keep: "Callable[[Region], bool]") -> "EvidencePool":
        """Only the regions `keep` accepts (a writer that can only use some regions says which)."""
        by_doc = {s: [r for r in rs if keep(r)] for s, rs in self.by_doc.items()}
        return EvidencePool({s: rs for s, rs in by_doc.items() if rs}, self.first_titles)

    def tables_first(self) -> "EvidencePool":
        """Text regions only for documents with fewer than `FEW_TABLES` table regions: a document of tables is asked
        about them; a paper or a report with a table or two keeps its text (its one table may give nothing)."""
        by_doc = {s: rs if sum(r.source == "table" for r in rs) < FEW_TABLES else [r for r in rs if r.source != "text"]
                  for s, rs in self.by_doc.items()}
        return EvidencePool({s: rs for s, rs in by_doc.items() if rs}, self.first_titles)

    def cross_links(self) -> list[tuple[Region, list[Region]]]:
        """Tables with a table of another document that shares a line (a non-generic row label with an amount, under
        the same section) and a year in its column names, or a line item of one year (`line_items`: revenue, total
        assets), worked out once: where a cross-document linked question can be."""
        if self._links is None:
            tabs = [(r, lines(r.text), header_years(r.text), item_keys(r.text, table_name(r.text, r.page.text, r.page.tables_md)))
                    for rs in self.by_doc.values() for r in rs if r.source == "table"]
            self._links = [(r, [o for o, ro, yo, ko in tabs if o.stem != r.stem and (rows & ro and years & yo or keys & ko)])
                           for r, rows, years, keys in tabs]
            self._links = [(r, ps) for r, ps in self._links if ps]
        return self._links

    def doc_links(self) -> list[tuple[Region, list[Region]]]:
        """Tables with a table on another page of the same document that shares an entity (a non-generic row label
        holding an amount, the same section) or makes a named ratio with it (`line_items`: net income over total
        assets): where a bridge, a ratio or a difference over two pages can be.
        Worked out once, over the whole document rather than a random pair of regions."""
        if self._doc_links is None:
            out: list[tuple[Region, list[Region]]] = []
            for rs in self.by_doc.values():
                tabs = [(r, lines(r.text), item_keys(r.text, table_name(r.text, r.page.text, r.page.tables_md))) for r in rs
                        if r.source == "table"]
                for r, rows, keys in tabs:
                    partners = [o for o, ro, ko in tabs if o.page_id != r.page_id and (rows & ro or ratio_pair(keys, ko))]
                    if partners:
                        out.append((r, partners))
            self._doc_links = out
        return self._doc_links

    def sources(self) -> set[str]:
        return {r.source for rs in self.by_doc.values() for r in rs}

    @property
    def n_regions(self) -> int:
        return sum(len(v) for v in self.by_doc.values())

    def possible(self, kind: str) -> bool:
        if kind == "single":
            return self.n_regions > 0
        if kind == "multi_page":
            return any(len({r.page_id for r in rs}) >= 2 for rs in self.by_doc.values())
        return len(self.by_doc) >= 2

    def pick(self, kind: str, rng: random.Random) -> Evidence | None:
        """One evidence set of `kind`, or None when the corpus cannot provide it."""
        if not self.possible(kind):
            return None
        stems = sorted(self.by_doc)
        if kind == "single":  # a document first, so every document is tried however few regions it has
            first = _weighted(rng, self.by_doc[rng.choice(stems)])
            return Evidence(kind, (first,))
        if kind == "multi_page":
            links = self.doc_links()
            if links and rng.random() < 0.5:  # half of the time two tables of one document sharing an entity
                first, partners = links[rng.randrange(len(links))]
                return Evidence(kind, (first, _weighted(rng, partners)))
            stem = rng.choice([s for s in stems if len({r.page_id for r in self.by_doc[s]}) >= 2])
            first = _weighted(rng, self.by_doc[stem])
            others = [r for r in self.by_doc[stem] if r.page_id != first.page_id]
        else:
            links = self.cross_links()
            if links and rng.random() < 0.5:  # half of the time two tables of the same line and year
                first, partners = links[rng.randrange(len(links))]
                return Evidence(kind, (first, _weighted(rng, partners)))
            first = _weighted(rng, [r for s in stems for r in self.by_doc[s]])
            others = [r for s in stems if s != first.stem for r in self.by_doc[s]]
        # A table is paired, most of the time, with a table that shares a row label: a linked question (a row
        # found in one and read in the other, or the same line compared) needs such a pair.
        if first.source == "table":
            rows = row_labels(first.text)
            linked = [r for r in others if r.source == "table" and rows & row_labels(r.text)]
            if kind == "cross_doc":  # two companies share "Total" in every table: the same line of the same year
                rows = frozenset(r for r in rows if not generic_label(r))
                years = header_years(first.text)
                linked = [r for r in linked if rows & row_labels(r.text) and years & header_years(r.text)]
            if linked and rng.random() < 0.8:
                return Evidence(kind, (first, _weighted(rng, linked)))
        # Half of the time the second region has the same kind of content as the first (table and table,
        # chart and chart): such pairs support comparisons, the other half mixes modalities.
        same = [r for r in others if r.source == first.source]
        second = _weighted(rng, same if same and rng.random() < 0.5 else others)
        return Evidence(kind, (first, second))


def row_labels(text: str) -> frozenset[str]:
    """The first cells of a markdown table's rows (lower-cased), header excluded."""
    rows = [line.strip().strip("|").split("|")[0].strip().lower() for line in text.splitlines()
            if line.strip().startswith("|")]
    return frozenset(r for r in rows[1:] if len(r) >= 3 and not set(r) <= set("-: "))


def lines(text: str) -> frozenset[tuple[str, str]]:
    """(section, row label) of a table's rows holding an amount, labels normalised, generic ones ("Total") left out."""
    grid = table_grid(text)
    return frozenset((grid.sections.get(r, ""), label_key(r)) for r, _, v in grid.cells
                     if quantity(v) is not None and not generic_label(r))


def header_years(text: str) -> frozenset[str]:
    """The years named in a markdown table's first line (its column names)."""
    rows = markdown_rows(text)
    return frozenset(re.findall(r"(?<!\d)(?:19|20)\d\d(?!\d)", " | ".join(rows[0]) if rows else ""))


def _weighted(rng: random.Random, regions: list[Region]) -> Region:
    weights = [WEIGHT.get(r.source, 1.0) for r in regions]
    return rng.choices(regions, weights=weights, k=1)[0]
