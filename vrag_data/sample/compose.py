"""Compose one synthetic document (a portrait report or a landscape slide deck) from a company's facts.

Page 1 introduces the company; the other pages (shuffled) hold the financial table, the charts, an optional
image-only "scanned" memo and filler text. Every fact that a question can ask about is recorded as a Region
in raw pixels of the page rendered at `GOLD_DPI`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

import pymupdf

from vrag_data.sample.canvas import Canvas, Rect, Region
from vrag_data.sample.charts import bar_chart, line_chart, pie_chart
from vrag_data.sample.facts import CompanyFacts, filler_sentences, fmt_int
from vrag_data.sample.scan import rotate_box, scan_raster

GOLD_DPI = 144
FIXED_DATE = "D:20240101000000Z"  # fixed metadata dates keep the bytes reproducible


@dataclass(frozen=True)
class Style:
    width: float
    height: float
    margin: float
    title: float
    body: float
    table: float
    chart: float
    doc_type: str


REPORT = Style(612, 792, 54, 20, 11, 10, 9, "Report")
SLIDES = Style(720, 405, 36, 24, 15, 12, 10, "Slide deck")


@dataclass
class BuiltDoc:
    file_name: str
    facts: CompanyFacts
    style: Style
    pdf: bytes
    n_pages: int
    page_px: list[tuple[int, int]]  # (width, height) of each page at GOLD_DPI
    regions: dict[str, Region] = field(default_factory=dict)  # fact key -> region in px at GOLD_DPI
    scanned_pages: list[int] = field(default_factory=list)


def _px(rect: Rect) -> Rect:
    s = GOLD_DPI / 72
    return (rect[0] * s, rect[1] * s, rect[2] * s, rect[3] * s)


class _Builder:
    def __init__(self, facts: CompanyFacts, style: Style, rng: random.Random, seed: int) -> None:
        self.f, self.st, self.rng, self.seed = facts, style, rng, seed
        self.doc = pymupdf.open()
        self.regions: dict[str, Region] = {}
        self.scanned: list[int] = []

    def _page(self) -> Canvas:
        page = self.doc.new_page(width=self.st.width, height=self.st.height)
        return Canvas(page, self.doc.page_count, self.st.margin)

    def _add(self, key: str, cv: Canvas, rect: Rect, source: str, text: str) -> None:
        self.regions[key] = Region(cv.page_no, _px(rect), source, text)

    def _footer(self, cv: Canvas) -> None:
        label = f"{self.f.name} - page {cv.page_no}"
        cv.text(cv.left, self.st.height - self.st.margin / 2, label, 8, color=(0.45, 0.45, 0.45))
        cv.flush()  # every page method ends with the footer

    def intro(self) -> None:
        f, st = self.f, self.st
        cv = self._page()
        year = f.years[-1]
        kind = "Annual report" if f.kind == "report" else "Investor briefing"
        cv.heading(f"{f.name}: {kind} {year}", st.title, gap=st.body)
        facts = [
            f"{f.name} was founded in {f.founded} and is headquartered in {f.hq_city}.",
            f"The company is led by chief executive {f.ceo}.",
            f"At the end of {year}, {f.name} employed {fmt_int(f.headcount)} people in {f.offices} offices.",
        ]
        filler = filler_sentences(self.rng, 3 if f.kind == "report" else 1)
        boxes = cv.paragraph(facts + filler, st.body, bullet=f.kind == "slides")
        for key, box, text in zip(("founded", "ceo", "headcount"), boxes, facts):
            self._add(f"intro:{key}", cv, box, "text", text)
        self._footer(cv)

    def table(self) -> None:
        f, st = self.f, self.st
        cv = self._page()
        cv.heading("Selected financial figures", st.title * 0.8)
        header = ["USD millions", *[str(y) for y in f.years]]
        rows = [[m, *[fmt_int(f.table[m][y]) for y in f.years]] for m in f.table_metrics]
        cells = cv.table(header, rows, st.table)
        for r_i, m in enumerate(f.table_metrics, start=1):
            for c_i, y in enumerate(f.years, start=1):
                self._add(f"table:{m}:{y}", cv, cells[r_i][c_i], "table", rows[r_i - 1][c_i])
        cv.caption(f"Table 1. Selected financial figures of {f.name}, {f.years[0]}\u2013{f.years[-1]}.")
        if f.kind == "report":
            cv.paragraph(filler_sentences(self.rng, 3), st.body)
        self._footer(cv)

    def chart(self, which: str) -> None:
        f, st = self.f, self.st
        cv = self._page()
        height = min(cv.remaining() - 30, 330) if f.kind == "report" else cv.remaining() - 4
        area = cv.reserve(height)
        if which == "bar":
            labels = bar_chart(cv, area, f"Units sold by region, {f.bar_year}", f.bar, "thousand units", st.chart)
        elif which == "line":
            labels = line_chart(cv, area, "Monthly active users by quarter", f.line, "thousands", st.chart)
        else:
            labels = pie_chart(cv, area, f"Revenue by segment, {f.pie_year}", f.pie, st.chart + 1)
        data = f.bar if which == "bar" else f.line if which == "line" else f.pie
        for cat, rect in labels.items():
            shown = f"{cat}: {data[cat]}%" if which == "pie" else fmt_int(data[cat])
            self._add(f"{which}:{cat}", cv, rect, "chart", shown)
        if f.kind == "report":
            cv.y += 8
            what = {"bar": "units sold", "line": "users"}.get(which, "revenue mix")
            cv.caption(f"Figure. {f.name}: {what}.")
            cv.paragraph(filler_sentences(self.rng, 2), st.body)
        self._footer(cv)

    def memo(self) -> None:
        """Draw the memo on a scratch page, then place only its noisy raster on the real page."""
        f, st = self.f, self.st
        scratch = pymupdf.open()
        page = scratch.new_page(width=st.width, height=st.height)
        cv = Canvas(page, self.doc.page_count + 1, st.margin)
        size = st.body + 2  # a little larger so OCR can read it after the noise
        cv.heading("Internal memo: operations update", st.title * 0.9, gap=size)
        facts = [
            f"In {f.memo_month} {f.years[-1]}, the {f.memo_city} warehouse handled "
            f"{fmt_int(f.memo_shipments)} shipments.",
            f"The quality audit of the {f.memo_city} site gave a score of {f.memo_audit_score} out of 100.",
        ]
        boxes = cv.paragraph(facts + filler_sentences(self.rng, 1), size, bullet=f.kind == "slides")
        cv.flush()
        angle = round(self.rng.uniform(0.3, 1.0) * self.rng.choice((-1, 1)), 2)
        jpeg = scan_raster(page, GOLD_DPI, angle, seed=self.seed * 7919 + cv.page_no)
        w, h = round(st.width * GOLD_DPI / 72), round(st.height * GOLD_DPI / 72)
        real = self.doc.new_page(width=st.width, height=st.height)
        real.insert_image(real.rect, stream=jpeg)
        for key, box, text in zip(("shipments", "audit"), boxes, facts):
            self.regions[f"memo:{key}"] = Region(cv.page_no, rotate_box(_px(box), angle, w, h), "text", text)
        self.scanned.append(cv.page_no)
        scratch.close()

    def filler(self) -> None:
        cv = self._page()
        cv.heading("Operations review", self.st.title * 0.8)
        cv.paragraph(filler_sentences(self.rng, 6 if self.f.kind == "report" else 3), self.st.body,
                     bullet=self.f.kind == "slides")
        self._footer(cv)

    def build(self, file_name: str) -> BuiltDoc:
        f = self.f
        steps: list[Callable[[], None]] = [self.table, *[lambda w=w: self.chart(w) for w in f.charts]]
        if f.has_scan:
            steps.append(self.memo)
        target = self.rng.randint(4, 8)
        steps += [self.filler] * max(0, target - 1 - len(steps))
        self.rng.shuffle(steps)
        self.intro()
        for step in steps:
            step()
        self.doc.set_metadata({
            "title": f"{f.name} sample document", "author": "vrag-data sample corpus", "subject": "synthetic",
            "creator": "vrag-data", "producer": "vrag-data", "creationDate": FIXED_DATE, "modDate": FIXED_DATE,
            "keywords": "", "trapped": "",
        })
        pdf = self.doc.tobytes(garbage=3, deflate=True, no_new_id=True)
        sizes = [(round(p.rect.width * GOLD_DPI / 72), round(p.rect.height * GOLD_DPI / 72)) for p in self.doc]
        n = self.doc.page_count
        self.doc.close()
        return BuiltDoc(file_name, f, self.st, pdf, n, sizes, self.regions, self.scanned)


def build_document(facts: CompanyFacts, file_name: str, rng: random.Random, seed: int) -> BuiltDoc:
    style = REPORT if facts.kind == "report" else SLIDES
    return _Builder(facts, style, rng, seed).build(file_name)
