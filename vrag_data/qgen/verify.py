"""Verify a written question before it becomes a task. Cheapest check first; the first failure rejects.

1. not answerable closed-book: the answerer (student role, else judge) without pages must not get it right;
2. answerable from the evidence pages alone: the answerer shown only those pages agrees with the gold
   answer (the judge role compares, or the rule scorers when no judge model is configured); with several
   evidence pages, no single one of them may answer it (each hop is needed);
3. not ambiguous across the corpus: BM25's top pages for the question that are not evidence, shown to
   the answerer, must not also answer it (a reply that is not a decline means another page answers it,
   with the same answer or a different one).

Without an answerer model (the offline oracle setting) the same three checks run as labelled rules:
(1) the answer must not be spelled out in the question (choice questions excepted); (2) every value
the answer rests on must be visible in the evidence regions' extracted text; (3) no other top page may
cover the question's content words at least as well as the evidence pages do (>= `COVERAGE`).

Before either, structure: a multi-hop question needs each hop (no hop's answer named in the question, a computed
answer printed in no single region), and a cell named by (document, table columns, row, column) is the only such
cell of its document. The offline writer's hops are checked one by one with the rules (closed-book, answerable from
the hop's region, not ambiguous).

`duplicate_score` is the near-duplicate check that `generate` runs before these, against stored tasks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vrag_data.filters.setlevel import jaccard, question_tokens
from vrag_data.qgen.evidence import Region
from vrag_data.qgen.columns import same_columns
from vrag_data.qgen.grid import cell_at, table_grid
from vrag_data.qgen.oracle_writer import visible
from vrag_data.qgen.naming import table_name
from vrag_data.qgen.page_cells import reread_on_page
from vrag_data.qgen.writer import Attempt, Rejected, Written
from vrag_data.retrieve.base import Searcher
from vrag_data.rewards.answer import is_unanswerable, normalize_answer
from vrag_data.schema.records import ImageRef, Message, Page
from vrag_data.teacher.judge import Judge, make_judge
from vrag_data.teacher.pool import TeacherError, TeacherPool

COVERAGE = 0.8
_STOP = frozenset(
    "a an the of in on at to for from by with and or what which who whom whose when where how many much was were "
    "is are did do does its it their his her be been as than that this these those according using in into per "
    "value".split())

ANSWER_SYSTEM = (
    "You answer questions about documents. Use only the page images you are given. If those pages do not "
    "contain what the question needs, reply exactly <answer>Not answerable</answer>. Otherwise reply with the "
    "short answer only, inside <answer></answer>."
)
CLOSED_BOOK_SYSTEM = (
    "You answer questions without access to any document. Give your best short answer even if you are unsure, "
    "inside <answer></answer>."
)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S | re.I)


def reply_answer(text: str) -> str:
    body = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S | re.I)
    m = _ANSWER.findall(body)
    return (m[-1] if m else body).strip()


def content_terms(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOP and len(t) > 1}


def coverage(terms: set[str], text: str) -> float:
    if not terms:
        return 0.0
    return len(terms & set(normalize_answer(text).split())) / len(terms)


def page_text(p: Page) -> str:
    return "\n".join(x for x in (p.text, p.ocr_text, *p.tables_md) if x)


def is_choice(question: str) -> bool:
    """A question that offers its options ("... higher, 2019 or 2020?"): naming the answer is the point."""
    return re.search(r"\bor\b", question, re.I) is not None


def _numbers(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if any(c.isdigit() for c in t))


Known = frozenset[str] | tuple[frozenset[str], str]  # a known question's tokens, with its answer when known


def duplicate_score(question: str, known: list[Known], answer: str | None = None) -> float:
    """Highest question-token Jaccard (the filters' near-duplicate measure) with a known question that mentions the
    same numbers (questions differing only in a year or quarter ask for different facts) and, when both answers are
    known, has the same answer: a table's long description makes two questions about different cells of it share
    nearly every word, and they ask different facts."""
    toks = question_tokens(question)
    nums = _numbers(toks)
    mine = normalize_answer(answer) if answer is not None else None
    best = 0.0
    for k in known:
        tokens, theirs = k if isinstance(k, tuple) else (k, None)
        if _numbers(tokens) != nums or (mine is not None and theirs is not None and mine != theirs):
            continue
        best = max(best, jaccard(toks, tokens))
    return best


def known_question(question: str, answer: str) -> tuple[frozenset[str], str]:
    """A question as `duplicate_score` knows it: its tokens and its normalised answer."""
    return question_tokens(question), normalize_answer(answer)


def reread_cells(attempt: Attempt, w: Written) -> str:
    """Each cell the answer rests on, read again at its (row label, column name) in its region's table: a value
    that is not there (another column, a merged row, a label that names no single cell) is why, else ""."""
    regions = attempt.evidence.regions
    for idx, row, col, value in w.cells:
        got = cell_at(regions[idx].text, row, col) if 0 <= idx < len(regions) else None
        if got != value:
            return f"cell ({row!r}, {col!r}) holds {got!r}, not {value!r}"
    return ""


def reread_page_words(attempt: Attempt, w: Written) -> str:
    """Each cell the answer rests on, read again from its page's own words (`page_cells`): a value printed over
    several cells of the page, or not beside its row label, is why, else "". A page that kept no words at all
    (a table given without its page's text) has only the grid re-read; the report says so."""
    regions = attempt.evidence.regions
    for idx, row, _col, value in w.cells:
        page = regions[idx].page
        words = page.text or page.ocr_text
        why = reread_on_page(words, row, value) if words.strip() else ""
        if why:
            return f"page {page.page_id}: {why}"
    return ""


@dataclass
class VerifyReport:
    mode: str  # model | rules
    checks: dict[str, str] = field(default_factory=dict)  # check -> short outcome
    competing_pages: list[str] = field(default_factory=list)  # non-evidence top pages looked at


class Verifier:
    def __init__(self, pages: dict[str, Page], searcher: Searcher | None, pool: TeacherPool | None, *,
                 loader=None, max_pixels: int | None = None, top_k: int = 5, n_competing: int = 3,  # noqa: ANN001
                 labels: dict[str, str] | None = None) -> None:
        self.pages, self.searcher, self.pool = pages, searcher, pool
        self.labels = labels or {}  # stem -> the name questions give the document
        self.by_stem: dict[str, list[Page]] = {}
        for p in pages.values():
            self.by_stem.setdefault(p.stem, []).append(p)
        self.loader, self.max_pixels, self.top_k, self.n_competing = loader, max_pixels, top_k, n_competing
        self.answerer = next((r for r in ("student", "judge") if pool is not None and pool.kind(r) == "openai"), None)
        self.judge: Judge = make_judge(pool, "judge")
        self.mode = "model" if self.answerer else "rules"

    def competing_pages(self, w: Written, evidence: list[str]) -> list[str]:
        if self.searcher is None:
            return []
        hits = self.searcher.search([w.question], top_k=self.top_k)[0]
        return [h.page_id for h in hits if h.page_id not in evidence and h.page_id in self.pages][: self.n_competing]

    async def verify(self, attempt: Attempt, w: Written) -> VerifyReport | Rejected:
        rep = VerifyReport(self.mode)
        moved = reread_cells(attempt, w)
        if moved:
            return Rejected("verify", "cell_mismatch", moved, w.question, w.answer)
        spans = reread_page_words(attempt, w)
        if spans:
            return Rejected("verify", "cell_not_on_page", spans, w.question, w.answer)
        if w.cells:
            wordless = any(not (attempt.evidence.regions[i].page.text or attempt.evidence.regions[i].page.ocr_text).strip()
                           for i, *_ in w.cells)
            rep.checks["cells"] = (f"{len(w.cells)} cell(s) re-read at (row, column)"
                                   + (" (a page without words: grid only)" if wordless else " and in the page's words"))
        bad = self._linked(attempt, w, rep) or self._same_table_elsewhere(attempt, w, rep)
        if bad is None and self.answerer is None:
            bad = self._rules(attempt, w, rep)
            for i, hop in enumerate(w.hops):
                sub = Written(hop.question, hop.answer, "Str", "extraction", (hop.answer,))
                bad = bad or self._rules(attempt, sub, rep, [attempt.evidence.regions[hop.region]], f"hop{i + 1}_", w)
        elif bad is None:
            bad = await self._model(attempt, w, rep)
        return bad or rep

    # -- structure (both modes) --------------------------------------------------------------------
    def _linked(self, attempt: Attempt, w: Written, rep: VerifyReport) -> Rejected | None:
        """A multi-hop question needs every hop: no hop's answer is given away by the question (a bridge row named
        in it), and a computed answer is printed in no single evidence region (else one look-up answers it)."""
        for hop in w.hops[:-1]:
            if visible(hop.answer, w.question):
                return Rejected("verify", "hop_not_needed", f"the question names hop answer {hop.answer!r}",
                                w.question, w.answer)
        if len(attempt.evidence.regions) > 1 and w.answer not in w.visible:
            for r in attempt.evidence.regions:
                if visible(w.answer, r.text):
                    return Rejected("verify", "single_hop_suffices", f"the answer is printed in region of {r.page_id}",
                                    w.question, w.answer)
        if w.hops:
            rep.checks["hops"] = f"{len(w.hops)} hops, each needed"
        return None

    def _same_table_elsewhere(self, attempt: Attempt, w: Written, rep: VerifyReport) -> Rejected | None:
        """A cell named by (document, table columns, row, column) must name one value: another table of the same
        document with the same columns and that row holding a different value makes the question ambiguous."""
        regions = attempt.evidence.regions
        # a hop that answers with a row ("which row has the highest ...") names its table by the columns alone
        by_row = {h.region for h in w.hops[:-1] if any(c[0] == h.region and c[1] == h.answer for c in w.cells)}
        for idx, row, col, value in w.cells:
            own = regions[idx]
            header = table_grid(own.text).header[1:]  # what the question names a table by: its title, else columns
            title = table_name(own.text, own.page.text, own.page.tables_md)
            by_title = bool(title) and title in w.question
            for p in self.by_stem.get(own.stem, []):
                for md in p.tables_md:
                    if md.strip() == own.text.strip():
                        continue
                    if by_title and table_name(md, p.text, p.tables_md).lower() != title.lower():
                        continue
                    if not by_title and not same_columns(table_grid(md).header[1:], header):
                        continue
                    if idx in by_row:
                        return Rejected("verify", "ambiguous", f"another table with the same columns on {p.page_id}: "
                                        "'which row' has no single table to look in", w.question, w.answer)
                    other = cell_at(md, row, col)
                    if other is not None and other != value:
                        return Rejected("verify", "ambiguous", f"a table of the same columns on {p.page_id} holds "
                                        f"{other!r} at ({row!r}, {col!r})", w.question, w.answer)
        if w.cells:
            rep.checks["same_table_elsewhere"] = "no other table of the document names these cells differently"
        return None

    # -- offline rules -----------------------------------------------------------------------------
    def _rules(self, attempt: Attempt, w: Written, rep: VerifyReport, regions: list[Region] | None = None,
               tag: str = "", outer: Written | None = None) -> Rejected | None:
        """The three rule checks on the question, or on one hop's sub-question `w` (`regions` = the hop's region,
        `tag` prefixes its report keys, `outer` = the whole question, which a rejection records)."""
        regions = regions if regions is not None else list(attempt.evidence.regions)
        rec = outer or w
        q, a = rec.question, rec.answer
        why = (lambda d: f"{tag.rstrip('_')} ({w.question!r} -> {w.answer!r}): {d}") if tag else (lambda d: d)
        if not is_choice(w.question) and visible(w.answer, w.question):
            return Rejected("verify", "answerable_closed_book", why("rules: the answer is spelled out in the question"),
                            q, a)
        rep.checks[f"{tag}closed_book"] = "answer not in question"
        ev_text = "\n".join(r.text for r in regions)
        missing = [v for v in (w.visible or (w.answer,)) if not visible(v, ev_text)]
        if missing:
            return Rejected("verify", "not_answerable_from_evidence",
                            why(f"rules: {missing!r} not found in the evidence regions' text"), q, a)
        rep.checks[f"{tag}answerable"] = "values visible in evidence"
        terms = content_terms(w.question)
        evidence = list(dict.fromkeys(r.page_id for r in regions))
        pages_text = "\n".join(page_text(self.pages[p]) for p in evidence if p in self.pages)
        own = coverage(terms, pages_text)
        competing = self.competing_pages(w, attempt.evidence.page_ids)
        rep.competing_pages = list(dict.fromkeys([*rep.competing_pages, *competing]))
        # against a page of the same document, the document's name in the question tells no page of it from another
        # (its cover or summary page prints that name and used to outscore the evidence page): its words do not count
        inner = {stem: terms - content_terms(self.labels.get(stem, ""))
                 for stem in {self.pages[p].stem for p in evidence if p in self.pages}}
        for pid in competing:
            stem = self.pages[pid].stem
            mine, c = (own, coverage(terms, page_text(self.pages[pid]))) if stem not in inner else \
                (coverage(inner[stem], pages_text), coverage(inner[stem], page_text(self.pages[pid])))
            if c >= max(COVERAGE, mine):
                return Rejected("verify", "ambiguous",
                                why(f"rules: page {pid} covers {c:.0%} of the question's terms (evidence {mine:.0%})"),
                                q, a)
        rep.checks[f"{tag}ambiguity"] = f"{len(competing)} other top pages cover less (evidence {own:.0%})"
        return None

    # -- model roles ---------------------------------------------------------------------------------
    async def _ask(self, attempt: Attempt, system: str, question: str, pages: list[str]) -> str:
        images = [ImageRef(page_id=p) for p in pages]
        msgs = [Message(role="system", text=system), Message(role="user", text=f"Question: {question}", images=images)]
        res = await self.pool.chat(self.answerer, msgs, image_loader=self.loader if images else None,  # type: ignore[union-attr,arg-type]
                                   max_pixels=self.max_pixels if images else None)
        attempt.request_ids.append(res.request_id)
        if res.problem:  # the one door: an unusable reply answers nothing (the question is refused: verifier_error)
            raise TeacherError(f"role {self.answerer}: unusable reply ({res.problem})")
        return reply_answer(res.text)

    async def _agrees(self, attempt: Attempt, w: Written, prediction: str) -> bool:
        j = await self.judge.judge(w.question, w.answer, prediction, w.answer_format)
        attempt.request_ids.extend(j.request_ids)
        return j.correct

    async def _model(self, attempt: Attempt, w: Written, rep: VerifyReport) -> Rejected | None:
        try:
            guess = await self._ask(attempt, CLOSED_BOOK_SYSTEM, w.question, [])
            if not is_unanswerable(guess) and await self._agrees(attempt, w, guess):
                return Rejected("verify", "answerable_closed_book", f"answered without pages: {guess[:80]!r}",
                                w.question, w.answer)
            rep.checks["closed_book"] = f"guess {guess[:40]!r} is wrong"
            evidence = attempt.evidence.page_ids
            got = await self._ask(attempt, ANSWER_SYSTEM, w.question, evidence)
            if is_unanswerable(got) or not await self._agrees(attempt, w, got):
                return Rejected("verify", "not_answerable_from_evidence",
                                f"from the evidence pages the verifier answered {got[:80]!r}", w.question, w.answer)
            rep.checks["answerable"] = f"answered {got[:40]!r} from the evidence"
            if len(evidence) > 1:  # a multi-hop question: no single evidence page may answer it
                for pid in evidence:
                    one = await self._ask(attempt, ANSWER_SYSTEM, w.question, [pid])
                    if not is_unanswerable(one) and await self._agrees(attempt, w, one):
                        return Rejected("verify", "single_hop_suffices", f"page {pid} alone answers it ({one[:60]!r})",
                                        w.question, w.answer)
                rep.checks["hops"] = f"no single one of {len(evidence)} evidence pages answers it"
            rep.competing_pages = self.competing_pages(w, evidence)
            if rep.competing_pages:
                other = await self._ask(attempt, ANSWER_SYSTEM, w.question, rep.competing_pages)
                if not is_unanswerable(other):
                    same = await self._agrees(attempt, w, other)
                    how = "the same answer" if same else f"a different answer ({other[:60]!r})"
                    return Rejected("verify", "ambiguous",
                                    f"non-evidence pages {rep.competing_pages} also answer it with {how}",
                                    w.question, w.answer)
            rep.checks["ambiguity"] = f"{len(rep.competing_pages)} other top pages do not answer it"
        except TeacherError as err:
            return Rejected("verify", "verifier_error", str(err), w.question, w.answer)
        return None
