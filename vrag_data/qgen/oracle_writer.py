"""The offline question writer (clearly labelled `oracle`): template questions, no model.

For each evidence region it looks up the facts drawn inside it (sample-corpus documents, `known_facts`)
and whose printed value is visible in the region's extracted text; it then fills a template:
- single / extraction: the fact's own question;
- single / logic: two comparable facts of the region ("higher in 2019 or 2020?");
- multi_page / cross_doc, extraction: both values as a list;
- multi_page, logic: a money figure per employee (table metric / headcount on another page);
- cross_doc, logic: the same quantity of two companies compared, or two headcounts added.
Documents without known facts (any real corpus) get questions from their extracted tables only, each naming its
document (company, report, period: `docname`): a cell (single/extraction), the higher of two rows in a column
(single/logic), and over tables on two pages or two documents a linked two-hop question (`table_hops`: a bridge row
for extraction, a difference or ratio for logic). Tables without column names or unique row labels are not used.
A document without a usable table gets text questions: a sentence's one number, blanked (`cloze`). Chart and
figure regions of such documents need a model writer.
Everything is deterministic for an attempt (seeded by its index).
"""

from __future__ import annotations

import json
import random

from vrag_data.qgen.evidence import Evidence, Region
from vrag_data.qgen.cells import plain, quantity
from vrag_data.qgen.grid import Grid, table_grid
from vrag_data.qgen.known_facts import Fact
from vrag_data.qgen.cloze import cloze_candidates, cloze_question, margin_numbers
from vrag_data.qgen.survey import region_shares, share_question
from vrag_data.qgen.powers import holds_flattened
from vrag_data.qgen.terms import term_candidates, term_question
from vrag_data.qgen.text_scope import TextScope
from vrag_data.qgen.codes import code_columns
from vrag_data.qgen.table_compare import weigh
from vrag_data.qgen.naming import contents_page, named_by_columns, position_reference, region_where, table_name
from vrag_data.qgen.table_hops import linked, unnamed, untitled
from vrag_data.qgen.writer import ORACLE, Attempt, Rejected, Written
from vrag_data.rewards.answer import normalize_answer
from vrag_data.sample.facts import fmt_int

NAME = ORACLE


def visible(value: str, text: str) -> bool:
    """`value` appears in `text` as whole tokens (after the answer normalisation: case, punctuation)."""
    v = normalize_answer(value)
    return bool(v) and f" {v} " in f" {normalize_answer(text)} "


def facts_in(region: Region, facts: list[Fact]) -> list[Fact]:
    """Facts drawn inside the region whose value the region's text shows."""
    x1, y1, x2, y2 = region.block.bbox.raw
    tol = 4.0
    out = []
    for f in facts:
        if f.page != region.page.page:
            continue
        cx, cy = f.center(region.page.dpi)
        if x1 - tol <= cx <= x2 + tol and y1 - tol <= cy <= y2 + tol and visible(f.value, region.text):
            out.append(f)
    return out


_COMPARE = {
    "table": "In which year was {entity}'s {what} higher, {a} or {b}?",
    "bar": "In {year}, did {entity} sell more units in {a} or in {b}?",
    "line": "Did {entity} have more monthly active users in {a} or in {b}?",
    "pie": "Which segment brought {entity} a larger share of its {year} revenue, {a} or {b}?",
}


def _compare_single(rng: random.Random, facts: list[Fact]) -> Written | None:
    by_group: dict[str, list[Fact]] = {}
    for f in facts:
        if f.number is not None and f.group.split(":")[0] in _COMPARE:
            by_group.setdefault(f.group, []).append(f)
    groups = sorted(g for g, fs in by_group.items() if len({f.number for f in fs}) >= 2)
    if not groups:
        return None
    fs = by_group[rng.choice(groups)]
    a, b = rng.sample(fs, 2)
    if a.number == b.number:
        return None
    kind, _, rest = a.group.partition(":")
    what = rest if kind == "table" else ""
    q = _COMPARE[kind].format(entity=a.entity, what=what, year=rest, a=a.label, b=b.label)
    win = a if (a.number or 0) > (b.number or 0) else b
    return Written(q, win.label, "Str", "logic", (a.value, b.value), NAME)


def _pair_list(a: Fact, b: Fact) -> Written:
    q = f"What was {a.phrase}, and what was {b.phrase}?"
    return Written(q, json.dumps([a.value, b.value], ensure_ascii=False), "List", "extraction", (a.value, b.value), NAME)


def _per_employee(a: Fact, b: Fact) -> Written | None:
    money, people = (a, b) if a.group.startswith("table:") else (b, a)
    if not (money.group.startswith("table:") and people.group == "headcount" and people.number):
        return None
    if money.label != people.label:  # the headcount is for one year: only that year's figure divides sensibly
        return None
    metric = money.group.split(":", 1)[1]
    value = (money.number or 0) * 1000 / people.number
    q = (f"Using its financial table and its headcount at the end of {people.label}, what was {money.entity}'s "
         f"{metric} per employee in {money.label}, in thousand USD rounded to one decimal?")
    return Written(q, f"{value:.1f}", "Float", "logic", (money.value, people.value), NAME)


def _cross_logic(a: Fact, b: Fact) -> Written | None:
    if a.number is None or b.number is None or a.group != b.group or a.entity == b.entity:
        return None
    if a.group == "headcount" and a.label == b.label:
        q = f"How many people did {a.entity} and {b.entity} employ together at the end of {a.label}?"
        return Written(q, fmt_int(int(a.number + b.number)), "Int", "logic", (a.value, b.value), NAME)
    kind = a.group.split(":")[0]
    if kind in _COMPARE and a.label == b.label and a.number != b.number:
        what = a.phrase.replace(f"{a.entity}'s ", "").replace(a.entity, "the company")
        q = f"Which company reported the higher figure for {what}: {a.entity} or {b.entity}?"
        win = a if a.number > b.number else b
        return Written(q, win.entity, "Str", "logic", (a.value, b.value), NAME)
    return None


def _cell_question(where: str, row: str, col: str, value: str) -> str:
    sign = " (a negative amount is printed in parentheses or with a minus sign)" if _negative(value) else ""
    return f"In {where}, what is the {plain(col)} value of {row}{sign}?"


def _negative(value: str) -> bool:
    return value.strip().startswith(("(", "-", "\u2212")) and quantity(value) is not None


def _form_fields(grid: Grid) -> bool:
    """Rows labelled as a form's fields ("ELT:", "Model/Series:"): the "column" above them is a filled-in value
    (the aircraft's make), not a column name a question can ask under."""
    rows = {r for r, _, _ in grid.cells}
    return 2 * sum(r.rstrip().endswith(":") for r in rows) >= len(rows)


def _where(region: Region, grid: Grid, label: str, running: frozenset[str]) -> str | Rejected:
    """How a question names a table: its caption or title and its document, else its place on the page (a true
    reference a reader can follow); a document without a name, or a table without either, gives none."""
    if not label:
        return unnamed(region.stem)
    where = region_where(region.text, region.page.text, grid, label, region.page.tables_md, running)
    if named_by_columns(where):
        where = position_reference(region.text, region.page.text, region.page.page, region.page.tables_md, label)
        if not where:
            return untitled(region.page_id)
    return where


def _table_cell(rng: random.Random, region: Region, label: str, running: frozenset[str] = frozenset()) -> Written | Rejected:
    """A cell of an extracted markdown table (find_tables / MinerU), for documents without known facts."""
    grid = table_grid(region.text)
    if grid.problem:
        return Rejected("writer", "table_malformed", f"oracle: {grid.problem}")
    if _form_fields(grid):
        return Rejected("writer", "table_malformed", "oracle: a form's fields, no table with named columns")
    where = _where(region, grid, label, running)
    if isinstance(where, Rejected):
        return where
    codes = code_columns(grid.header, grid.cells)
    # a note's number, a line number: no value asked; nor one its whole column prints (a form's zeros, a category
    # on every row): the answer is a guess away
    values: dict[str, set[str]] = {}
    for _, col, value in grid.cells:
        values.setdefault(col, set()).add(value)
    cells = [cell for cell in grid.cells if cell[1] not in codes and len(values[cell[1]]) > 1]
    if not cells:
        return Rejected("writer", "writer_declined", "oracle: only codes, notes, line numbers or one repeated value "
                        "in the table")
    row, col, value = rng.choice(cells)
    q = _cell_question(where, grid.row_phrase(row), col, value)
    return Written(q, value, "Str", "extraction", (value,), NAME, ((0, row, col, value),))


def _table_compare(rng: random.Random, region: Region, label: str,
                   running: frozenset[str] = frozenset()) -> Written | Rejected:
    """Which of two rows has the higher number in one column of an extracted table: two positive amounts of one
    unit and one section (the lines of one statement a reader weighs against each other), not a part and its
    total, not basic and diluted, not an outflow printed negative ("higher" of two outflows reads both ways)."""
    grid = table_grid(region.text)
    if grid.problem:
        return Rejected("writer", "table_malformed", f"oracle: {grid.problem}")
    where = _where(region, grid, label, running)
    if isinstance(where, Rejected):
        return where
    return weigh(rng, grid, where)


def _text_blank(rng: random.Random, ev: Evidence, label: str, scope: TextScope) -> Written | Rejected:
    """A sentence's one number or name blanked (`cloze`, `terms`), else a survey answer's share (`survey`): single
    questions over the text and survey charts of a document without tables."""
    if ev.kind != "single":
        return Rejected("writer", "writer_declined", f"oracle: no {ev.kind} template over text regions")
    if not label:
        return unnamed(ev.regions[0].stem)
    region = ev.regions[0]
    texts = scope.texts.get(region.stem, ())
    got = None
    if region.source == "text":  # a chart's labels are no sentences: only its answer shares are asked
        margin = margin_numbers(region.page.text)
        def fits(blanked: str, answer: str) -> bool:
            return scope.one_answer(region.stem, blanked, answer)

        off = scope.boilerplate(region.stem)
        got = cloze_question(rng, region.text, label, off, margin, fits) or term_question(
            rng, region.text, label, off,
            lambda term: scope.everywhere(region.stem, term) or scope.plain(region.stem, term), margin, fits)
    # answers under a question printed above them
    got = got or share_question(region.text, region.page.text, label, texts, rng.choice)
    if got is None:
        return Rejected("writer", "writer_declined", "oracle: no sentence with a number or a name a blank can ask "
                        "for, and no survey answer")
    q, value = got
    return Written(q, value, "Str", "extraction", (value,), NAME)


REDRAWS = 8  # draws of one attempt's evidence before a question given before is given again


class OracleWriter:
    """Template questions from known facts; `facts` maps a document stem to its facts."""

    name = NAME

    def __init__(self, facts: dict[str, list[Fact]], labels: dict[str, str] | None = None,
                 text: TextScope | None = None, pdfs: dict[str, str] | None = None) -> None:
        self.facts = facts
        self.labels = labels or {}  # stem -> readable document name (docname.document_label)
        self.text = text or TextScope()
        self.pdfs = pdfs or {}  # stem -> local source PDF, read for what the text layer flattens (`powers`)
        self._written: set[str] = set()  # questions this writer gave in this run

    def accepts(self, region: Region) -> bool:
        """Regions the templates can use: a known fact is visible in it, or it is an extracted table."""
        if facts_in(region, self.facts.get(region.stem, [])):
            return True
        if region.source in ("chart", "figure"):  # a survey chart whose text layer prints each answer by its share
            return bool(region_shares(region.text, region.page.text))
        if region.source == "text":  # used for documents without a usable table (`EvidencePool.tables_first`)
            if not self.text.body(region.stem, region.page.page):
                return False
            margin = margin_numbers(region.page.text)
            off = self.text.boilerplate(region.stem)
            return bool(cloze_candidates(region.text, off, margin) or term_candidates(region.text, off, margin)
                        or region_shares(region.text, region.page.text))
        return (region.source == "table" and region.text.lstrip().startswith("|") and not table_grid(region.text).problem
                and not contents_page(region.page.text)  # a contents page's "table" holds page numbers
                # a table no reader could find, by its name or its place on the page, gives none
                and bool(table_name(region.text, region.page.text, region.page.tables_md)
                         or position_reference(region.text, region.page.text, region.page.page, region.page.tables_md, "-")))

    def viable(self, evidence: Evidence, qtype: str) -> bool:
        """Whether the templates can write a question of `qtype` over `evidence` at all (a dry run: they are pure
        and cheap), so the attempt budget goes to evidence that can give a task."""
        return isinstance(self.write_sync(Attempt(0, evidence, qtype)), Written)

    async def write(self, attempt: Attempt) -> Written | Rejected:
        """A question over the attempt's evidence that this writer has not given in this run, when one of `REDRAWS`
        draws finds one: a region of a few cells asked again and again gave the same question (a near-duplicate)
        for most of the attempt budget, while its other cells went unasked."""
        out = self.write_sync(attempt)
        for draw in range(1, REDRAWS):
            if not isinstance(out, Written) or out.question not in self._written:
                break
            out = self.write_sync(attempt, draw)
        if isinstance(out, Written):
            self._written.add(out.question)
        return out

    def write_sync(self, attempt: Attempt, draw: int = 0) -> Written | Rejected:
        out = self._write(attempt, draw)
        pages = [(self.pdfs.get(r.stem, ""), r.page.page) for r in attempt.evidence.regions]
        if isinstance(out, Written) and self.pdfs and holds_flattened((out.answer, *out.visible), pages):
            return Rejected("writer", "writer_declined", "oracle: a value holds a power its page sets in superscript "
                            "(the text layer reads 2^17 as 217)")
        return out

    def _write(self, attempt: Attempt, draw: int) -> Written | Rejected:
        rng = random.Random(f"oracle:{attempt.idx}" if draw == 0 else f"oracle:{attempt.idx}:{draw}")
        ev = attempt.evidence
        found = [facts_in(r, self.facts.get(r.stem, [])) for r in ev.regions]
        out: Written | None = None
        if not any(found) and all(r.source in ("text", "chart", "figure") for r in ev.regions):  # no tables
            return _text_blank(rng, ev, self.labels.get(ev.regions[0].stem, ""), self.text)
        tables_only = not any(found) and all(r.source == "table" for r in ev.regions)
        if tables_only and any(s in self.text.shared_names for s in ev.stems):
            return Rejected("writer", "ambiguous_name", "oracle: another document of the workspace has the same name; "
                            "a table question could be about either")
        if tables_only:  # a document without known facts: questions from its extracted tables
            if ev.kind != "single":
                return linked(rng, ev.regions, self.labels, attempt.qtype)
            label = self.labels.get(ev.regions[0].stem, "")
            write = _table_compare if attempt.qtype == "logic" else _table_cell
            return write(rng, ev.regions[0], label, self.text.running.get(ev.regions[0].stem, frozenset()))
        if ev.kind == "single":
            if attempt.qtype == "logic":
                out = _compare_single(rng, found[0])
            elif found[0]:
                out = rng.choice(found[0])
                out = Written(out.question, out.value, out.fmt, "extraction", (out.value,), NAME)
        elif all(found):
            pairs = [(a, b) for a in found[0] for b in found[1] if a.key != b.key or a.entity != b.entity]
            rng.shuffle(pairs)
            for a, b in pairs:
                if attempt.qtype == "extraction":
                    out = _pair_list(a, b)
                elif ev.kind == "multi_page":
                    out = _per_employee(a, b)
                else:
                    out = _cross_logic(a, b)
                if out is not None:
                    break
        if out is None:
            what = "+".join(r.source for r in ev.regions)
            why = "no known fact visible in the region(s)" if not all(found) else f"no {attempt.qtype} template fits"
            return Rejected("writer", "writer_declined", f"oracle: {why} ({ev.kind}, {what})")
        return out
