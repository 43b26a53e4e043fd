"""`generate_tasks`: evidence -> question writer -> checks -> verification -> `tasks/generated.parquet`.

Attempts are numbered; attempt i asks for kind `kinds[i % len(kinds)]` and reasoning type
`types[(i // len(kinds)) % len(types)]`, so the kept tasks spread over both; for the first two thirds of the
attempt budget a kind that has its share of --n waits, so a hard kind (linked questions) gets the attempts an easy
one would have used. Work runs in batches of
`concurrency` attempts: writers in parallel, then the cheap checks (names, near-duplicates) in attempt
order, then verification in parallel. Every rejected attempt becomes a row of
`tasks/generate_rejections.parquet` (this run's rows are replaced on a re-run, others kept).

Re-running with the same settings is idempotent: a question whose task id is already in
`generated.parquet` counts as kept again ("already") and nothing is duplicated; teacher calls replay from
the run's request cache (`runs/<run_id>/requests.sqlite`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


from vrag_data.config import GenerateConfig, RoleConfig, RunConfig
from vrag_data.errors import VragError
from vrag_data.ids import short_hash, task_id
from vrag_data.inert import sanitize_text
from vrag_data.qgen.docname import document_label, neutral_reference
from vrag_data.qgen.first_page import first_heading, largest_font_text
from vrag_data.qgen.evidence import KINDS, EvidencePool
from vrag_data.qgen.picking import BARREN, evidence_key, fresh_pick
from vrag_data.qgen.known_facts import load_known_facts
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.run_records import GenerateSummary, Rejection, record_rejections
from vrag_data.qgen.tally import Tally, unusable_documents
from vrag_data.qgen.text_scope import text_scope
from vrag_data.qgen.plan import check_generation_vision
from vrag_data.qgen.verify import Known, Verifier, VerifyReport, duplicate_score, known_question
from vrag_data.qgen.writer import ROLE, Attempt, ModelWriter, Rejected, Writer, Written, check_question, outlined_page_loader
from vrag_data.schema.records import Document, EvidenceBox, Page, Task
from vrag_data.store import Workspace, read_records
from vrag_data.store.corpus import load_documents, load_pages
from vrag_data.tasks.store import load_tasks, shard_path, write_tasks

SHARD = "generated"
BENCHMARK = "generated"
HOP = {"single": "single", "multi_page": "multi_page", "cross_doc": "cross_doc"}


BARREN_TRIES = 30  # attempts after which a best-effort kind that kept nothing gives its turn to the others


def _open_kinds(kinds: list[str], tally: Tally, n: int, share_first: bool, best_effort: bool = False) -> list[str]:
    """The kinds attempts go to: for the first two thirds of the attempt budget only the kinds still under their
    share of --n, then every kind; unasked kinds (`best_effort`) that kept nothing after `BARREN_TRIES` attempts
    leave the turn to kinds that keep."""
    if best_effort:
        live = [k for k in kinds if tally.kept_by_kind.get(k, 0) or tally.asked_by_kind.get(k, 0) < BARREN_TRIES]
        kinds = live or kinds
    under = [k for k in kinds if tally.kept_by_kind.get(k, 0) < n / len(kinds)]
    return under if share_first and under else kinds


def _schedule(i: int, kinds: list[str], types: list[str]) -> tuple[str, str]:
    return kinds[i % len(kinds)], types[(i // len(kinds)) % len(types)]


def _roles(cfg: RunConfig) -> dict[str, RoleConfig]:
    """Configured roles; without a judge/student, a configured question_writer's endpoint also verifies."""
    roles = dict(cfg.roles)
    writer = roles.get(ROLE)
    if writer is not None and writer.kind == "openai":
        roles.setdefault("judge", writer.model_copy(deep=True))
    return {r: rc for r, rc in roles.items() if rc.kind == "openai"}


def _task(attempt: Attempt, w: Written, report: VerifyReport, docs: dict[str, Document], run_id: str,
          split: str, labels: dict[str, str]) -> Task:
    ev = attempt.evidence
    doc_ids = [docs[s].doc_id for s in ev.stems]
    boxes = [EvidenceBox(page_id=r.page_id, box=r.block.bbox, source=r.source, text=r.text[:500]) for r in ev.regions]
    return Task(
        task_id=task_id(doc_ids, w.question), question=w.question, answer=w.answer,
        answer_format=w.answer_format,  # type: ignore[arg-type]  # checked by the writer parser
        doc_ids=doc_ids, doc_stems=ev.stems, evidence_pages=ev.page_ids, evidence_boxes=boxes,
        sources=ev.sources, hop_type=HOP[ev.kind],  # type: ignore[arg-type]
        reasoning_type=w.reasoning_type, benchmark=BENCHMARK, split=split, source_id=f"{run_id}:{attempt.idx}",
        extra={"generator": "vrag-data tasks generate", "writer": w.writer, "kind": ev.kind, "requested_type": attempt.qtype,
               "verify": {"mode": report.mode, **report.checks}, "competing_pages": report.competing_pages,
               "layout_blocks": [r.block.block_id for r in ev.regions],
               # the printed values the answer rests on (known to the oracle; a model writer's answer itself)
               "support": list(w.visible), "documents": [labels.get(s, "") for s in ev.stems],
               # the asked cells: (page, row label, value), so a report outlines the cell, not every equal value
               "cells": [[ev.regions[i].page_id, row, value] for i, row, _, value in w.cells],
               "hops": [{"question": sanitize_text(h.question), "answer": sanitize_text(h.answer),
                         "page_id": ev.regions[h.region].page_id}
                        for h in w.hops]},
    )


def _label(doc: Document, first: Page | None, title_blocks: list[str]) -> str:
    """The readable name questions give the document (docname): its first page, and its source PDF when present."""
    # ingest stores the metadata title, else the first outline entry, else the stem: only the first is a title
    meta = "" if doc.title == doc.stem or (doc.toc and doc.title == doc.toc[0].title) else doc.title
    largest = largest_font_text(doc.source_path) if doc.kind == "pdf" else ""
    if doc.kind == "pdf" and Path(doc.source_path).is_file():
        title_blocks = []  # page 1's fonts were read: a layout "title" block they do not confirm is a section's heading
    # page 1 and the metadata are outside text: the name reaches the writer's prompt and every question made here
    label = document_label(first.text if first else "", meta, title_blocks, largest)
    if not label and doc.kind == "pdf":  # nothing set as a title: the page's top line, quoted as a heading
        label = neutral_reference(first_heading(doc.source_path))
    return sanitize_text(label)


@dataclass
class _Run:
    ws: Workspace
    gcfg: GenerateConfig
    run_id: str
    writer: Writer
    verifier: Verifier
    docs: dict[str, Document]
    labels: dict[str, str]  # stem -> readable document name
    # the questions a new one must not repeat: tasks stored before and tasks kept by this run (with their answers);
    # a question the verifier refused is not among them
    seen: list[Known]
    generated_ids: set[str]

    def rejection(self, attempt: Attempt, r: Rejected) -> Rejection:
        ev = attempt.evidence
        return Rejection(run_id=self.run_id, attempt=attempt.idx, kind=ev.kind, qtype=attempt.qtype,
                         sources=list(ev.sources), evidence_pages=ev.page_ids, stage=r.stage, reason=r.reason,
                         detail=r.detail, question=r.question, answer=r.answer, writer=self.writer.name,
                         requests=len(attempt.request_ids))


async def _batch(run: _Run, attempts: list[Attempt]) -> tuple[list[tuple[Attempt, Task, bool]], list[Rejection]]:
    written = await asyncio.gather(*(run.writer.write(a) for a in attempts))
    rejected: list[Rejection] = []
    pending: list[Known] = []  # this batch's questions on their way to the verifier
    todo: list[tuple[Attempt, Written]] = []
    reused: list[tuple[Attempt, Task, bool]] = []
    for a, w in zip(attempts, written):
        if isinstance(w, Rejected):
            rejected.append(run.rejection(a, w))
            continue
        bad = check_question(w, [run.docs[s] for s in a.evidence.stems], list(run.docs.values()), run.labels)
        if bad is not None:
            rejected.append(run.rejection(a, bad))
            continue
        tid = task_id([run.docs[s].doc_id for s in a.evidence.stems], w.question)
        if tid in run.generated_ids:  # the same question as an earlier run: keep the stored task
            reused.append((a, Task(task_id=tid, question=w.question, answer=w.answer, doc_ids=[], doc_stems=[]), True))
            continue
        sim = duplicate_score(w.question, [*run.seen, *pending], w.answer)
        if sim >= run.gcfg.dedup_threshold:
            rejected.append(run.rejection(a, Rejected("dedup", "near_duplicate",
                                                      f"question-token Jaccard {sim:.2f} with a task stored or kept, or "
                                                      "one before it in its batch, that has the same answer",
                                                      w.question, w.answer)))
            continue
        pending.append(known_question(w.question, w.answer))  # later attempts of this batch dedup against it
        todo.append((a, w))
    reports = await asyncio.gather(*(run.verifier.verify(a, w) for a, w in todo))
    kept = list(reused)
    for (a, w), rep in zip(todo, reports):
        if isinstance(rep, Rejected):
            rejected.append(run.rejection(a, rep))
        else:
            kept.append((a, _task(a, w, rep, run.docs, run.run_id, run.gcfg.split, run.labels), False))
            run.seen.append(known_question(w.question, w.answer))
    return kept, rejected


def generate_tasks(ws: Workspace, cfg: RunConfig | None = None, n: int | None = None, kinds: list[str] | None = None,
                   types: list[str] | None = None, sources: list[str] | None = None,
                   writer: Literal["oracle", "model"] | Writer = "oracle",
                   progress: Callable[[int, int], None] | None = None, new_only: bool = False) -> GenerateSummary:
    """Generate up to `n` verified tasks into `tasks/generated.parquet` (arguments override
    `cfg.tasks.generate`); `writer="model"` uses `cfg.roles.question_writer`. `new_only`: `n` new tasks, an
    earlier run's task found again does not count (the tasks stage's top-up, `vrag_data.qgen.topup`)."""
    cfg = cfg or RunConfig()
    over = {k: v for k, v in (("n", n), ("kinds", kinds), ("types", types), ("sources", sources)) if v is not None}
    try:
        gcfg = GenerateConfig.model_validate({**cfg.tasks.generate.model_dump(), **over})
    except ValueError as err:
        raise VragError(f"tasks generate: {str(err).splitlines()[-1].strip()} (kinds: {', '.join(KINDS)}; "
                        "types: extraction, logic; sources: text, table, chart, figure, layout)") from None
    check_generation_vision(cfg.roles, model_writer=writer == "model")  # the writer and the verifier see pages
    return asyncio.run(_generate(ws, cfg, gcfg, writer, progress, new_only, best_effort=kinds is None))


async def _generate(ws: Workspace, cfg: RunConfig, gcfg: GenerateConfig, writer_spec: str | Writer,
                    progress: Callable[[int, int], None] | None, new_only: bool = False,
                    best_effort: bool = False) -> GenerateSummary:
    from vrag_data.retrieve import build_index, load_index
    from vrag_data.teacher import RequestCache, TeacherPool

    docs = {d.stem: d for d in load_documents(ws)}
    if not docs:
        raise VragError(f"workspace {ws.root} has no ingested documents; run `vrag-data ingest PATH -w {ws.root}` first")
    pool_ev = EvidencePool.load(ws, list(gcfg.sources), gcfg.min_block_chars)
    kinds = [k for k in gcfg.kinds if pool_ev.possible(k)]
    if not kinds:
        raise VragError(f"workspace {ws.root}: no layout blocks of sources {list(gcfg.sources)} for kinds "
                        f"{list(gcfg.kinds)}; ingest with --layout pymupdf (or widen --sources/--kinds)")
    roles = _roles(cfg)
    if writer_spec == "model" and ROLE not in roles:
        raise VragError("the model writer needs roles.question_writer with an endpoint (or --writer-url and --writer-model)")
    wname = writer_spec if isinstance(writer_spec, str) else writer_spec.name
    run_id = "qgen-" + short_hash(gcfg.model_dump(mode="json"), wname,
                                  {r: rc.model_dump(mode="json") for r, rc in sorted(roles.items())}, n=12)
    pages = {p.page_id: p for p in load_pages(ws)}
    labels = {stem: _label(d, pages.get(f"{stem}_1"), pool_ev.first_titles.get(stem, [])) for stem, d in docs.items()}
    build_index(ws)  # skipped when the index is up to date; the ambiguity check searches it
    searcher = load_index(ws)
    pool = TeacherPool(roles, RequestCache(ws.run(run_id)), run_id, seed=gcfg.seed) if roles else None
    loader = outlined_page_loader(ws, gcfg.max_pixels)
    try:
        if pool is not None:
            await pool.check()
        if writer_spec == "oracle":
            writer: Writer = OracleWriter(load_known_facts(list(docs.values())), labels,
                                          text_scope(pages.values(), labels),
                                          {s: d.source_path for s, d in docs.items() if d.kind == "pdf"})
        elif writer_spec == "model":
            writer = ModelWriter(pool, loader, gcfg.max_pixels, labels)  # type: ignore[arg-type]  # pool exists: ROLE in roles
        else:
            writer = writer_spec  # type: ignore[assignment]
        pool_ev, kinds, notices = _restrict_to_writer(writer, pool_ev, kinds, ws)
        notices += moved_sources(docs)
        verifier = Verifier(pages, searcher, pool, loader=loader, max_pixels=gcfg.max_pixels,
                            top_k=gcfg.search_top_k, n_competing=gcfg.ambiguity_pages, labels=labels)
        previous = read_records(shard_path(ws, SHARD), Task)
        run = _Run(ws, gcfg, run_id, writer, verifier, docs, labels,
                   [known_question(t.question, t.answer) for t in load_tasks(ws)], {t.task_id for t in previous})
        summary = GenerateSummary(run_id=run_id, writer=writer.name, verify_mode=verifier.mode, target=gcfg.n,
                                  notices=notices, tally=Tally(requested=list(gcfg.kinds),
                                                               unusable=unusable_documents(docs, pages, pool_ev),
                                                               documents=sorted(docs)))
        kept, rejections = await _attempts(run, gcfg, pool_ev, kinds, summary, progress, new_only, best_effort)
    finally:
        if pool is not None:
            stats = pool.stats()
            await pool.close()
    summary.kept = len(kept)
    if pool is not None:
        summary.calls, summary.requests = stats["calls"], stats["requests"]
    _store(ws, run_id, previous, kept, rejections, summary)
    return summary


MOVED_SHOWN = 5  # moved source PDFs a notice names before "..."


def moved_sources(docs: dict[str, Document]) -> list[str]:
    """A notice naming the source PDFs that are not where ingest read them: their page 1's type (a title set large,
    the top heading) and the superscripts of their pages cannot be read, so questions name them from page text alone
    and the offline writer cannot tell a flattened power (2^17 read as 217)."""
    moved = sorted(s for s, d in docs.items()
                   if d.kind == "pdf" and "://" not in d.source_path and not Path(d.source_path).is_file())
    if not moved:
        return []
    more = ", ..." if len(moved) > MOVED_SHOWN else ""
    return [f"{len(moved)} source PDF(s) are not where ingest read them ({', '.join(moved[:MOVED_SHOWN])}{more}): "
            "their first page's type and their superscript powers are not read (names come from page text alone, a "
            "power such as 2^17 read as 217 is not caught); put the PDFs back or ingest them again from where they are"]


def _restrict_to_writer(writer: Writer, pool_ev: EvidencePool, kinds: list[str],
                        ws: Workspace) -> tuple[EvidencePool, list[str], list[str]]:
    """A writer that can only use some regions (the oracle) is only shown those: (regions, kinds, notices saying
    what it cannot write); none usable stops with one line."""
    accepts = getattr(writer, "accepts", None)
    notices: list[str] = []
    if accepts is None:
        return pool_ev, kinds, notices
    before = pool_ev.sources()
    pool_ev = pool_ev.restrict(accepts).tables_first()
    lost = sorted(before - pool_ev.sources())
    if lost:
        notices.append(f"writer {writer.name}: no usable {', '.join(lost)} region (it writes those only for "
                       "sample-corpus documents; real documents give table questions, and text questions where they have no "
                       "table): pass --writer-url and "
                       "--writer-model for the other sources")
    lost_kinds = [k for k in kinds if not pool_ev.possible(k)]
    if lost_kinds:
        notices.append(f"writer {writer.name}: kinds {', '.join(lost_kinds)} not possible with its usable regions")
    kinds = [k for k in kinds if pool_ev.possible(k)]
    if not kinds:
        raise VragError(f"writer {writer.name}: no usable evidence region in {ws.root} (the oracle needs "
                        "sample-corpus documents or extracted tables); use --writer-url/--writer-model")
    return pool_ev, kinds, notices


async def _attempts(run: "_Run", gcfg: GenerateConfig, pool_ev: EvidencePool, kinds: list[str], summary: GenerateSummary,
                    progress: Callable[[int, int], None] | None, new_only: bool,
                    best_effort: bool = False) -> tuple[dict[str, Task], list[Rejection]]:
    """Attempts in batches until `gcfg.n` tasks count (this run's, plus an earlier run's met again unless `new_only`)
    or the attempt limit; returns the kept tasks and every rejection (each attempt is accounted for)."""
    kept: dict[str, Task] = {}
    found_again: set[str] = set()  # an earlier run's tasks met again (once each, however often)
    rejections: list[Rejection] = []
    barren: set[tuple[str, ...]] = set()  # evidence the writer declined for a question type: not drawn again
    done = 0
    limit = gcfg.max_attempts or 6 * gcfg.n
    rng_seed = f"qgen:{gcfg.seed}"
    counted = lambda: done + (0 if new_only else summary.already)  # noqa: E731  # toward n
    while counted() < gcfg.n and summary.attempted < limit:
        # near the target, fewer attempts per batch: each one may cost several teacher calls
        size = min(gcfg.concurrency, limit - summary.attempted, max(1, 2 * (gcfg.n - counted())))
        attempts = []
        turn = _open_kinds(kinds, summary.tally, gcfg.n, summary.attempted < limit * 2 // 3, best_effort)
        for i in range(summary.attempted, summary.attempted + size):
            kind, qtype = _schedule(i, turn, list(gcfg.types))
            ev = fresh_pick(pool_ev, kind, qtype, f"{rng_seed}:{i}", barren, getattr(run.writer, "viable", None))
            attempts.append(Attempt(i, ev, qtype))
            summary.tally.ask(ev.kind, list(ev.stems))
        summary.attempted += size
        got, rej = await _batch(run, attempts)
        rejections += rej
        by_idx = {a.idx: a for a in attempts}
        barren |= {evidence_key(by_idx[r.attempt].evidence, r.qtype) for r in rej
                   if r.stage == "writer" and r.reason in BARREN and r.attempt in by_idx}
        for a, t, again in got:
            if (again and t.task_id not in found_again) or (not again and t.task_id not in kept and counted() < gcfg.n):
                summary.tally.keep(a.evidence.kind, list(a.evidence.stems))
            if again:
                found_again.add(t.task_id)
                summary.already = len(found_again)
            elif t.task_id not in kept and counted() < gcfg.n:
                kept[t.task_id] = t
                done += 1
            else:  # verified, but not stored: every attempt is accounted for in the rejections
                why = ("near_duplicate", "the same question as a task kept in this batch") if t.task_id in kept \
                    else ("target_met", "verified, but --n was met by earlier attempts of its batch")
                rejections.append(run.rejection(a, Rejected("dedup", *why, t.question, t.answer)))
        if progress is not None:
            progress(done + summary.already, summary.attempted)
    return kept, rejections


def _store(ws: Workspace, run_id: str, previous: list[Task], kept: dict[str, Task], rejections: list[Rejection],
           summary: GenerateSummary) -> None:
    """The generated shard (earlier runs' tasks and this run's), the rejections file, and the summary's counts."""
    ws.makedirs()
    stored = {t.task_id: t for t in previous}
    stored.update(kept)
    summary.shard = write_tasks(ws, SHARD, list(stored.values()))
    summary.stored = len(stored)
    summary.rejections_file = record_rejections(ws, run_id, rejections)
    summary.rejected = dict(sorted(Counter(r.reason for r in rejections).items()))
    summary.tally.reject([(r.kind, r.reason) for r in rejections])
    summary.tally.reject_docs([(s, r.reason) for r in rejections
                               for s in dict.fromkeys(p.rsplit("_", 1)[0] for p in r.evidence_pages)])
    new = list(kept.values())
    summary.by_kind = dict(sorted(Counter(t.hop_type for t in new).items()))
    summary.by_type = dict(sorted(Counter(t.reasoning_type or "" for t in new).items()))
    summary.by_source = dict(sorted(Counter(s for t in new for s in t.sources).items()))
