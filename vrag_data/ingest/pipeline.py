"""`ingest_paths`: plan (hash, skip unchanged, catch stem clashes), run documents in a process pool, record
errors. The Prefect flows call it on a shard of documents; the CLI calls it on everything."""

from __future__ import annotations

from typing import Any

import multiprocessing
import os
import signal
import time
from dataclasses import replace
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from vrag_data.errors import VragError
from vrag_data.ids import sha256_file
from vrag_data.inert import inert_stem
from vrag_data.ingest.backends import get_backend, ingest_hash
from vrag_data.ingest.render import import_pymupdf, remove_orphan_temp_images
from vrag_data.process import die_with_parent, terminate_pool
from vrag_data.progress import announce, line_every, progress_for
from vrag_data.ingest.discover import discover_inputs, input_kind
from vrag_data.ingest.document import DocJob, DocOutcome, PartOutcome, ingest_document, ingest_part, stitch_parts
from vrag_data.ingest.ocr import default_threads
from vrag_data.ingest.options import DocStats, IngestOptions, IngestSummary
from vrag_data.schema.records import IngestError
from vrag_data.store.corpus import append_errors, load_document, replace_errors
from vrag_data.store.workspace import Workspace

_console = Console(stderr=True)


class IngestFailed(VragError):
    """`strict` mode: the first error stops the run."""


def check_components(opts: IngestOptions) -> None:
    """External tools are checked before any document is touched (fail at once, one line)."""
    try:
        backend = get_backend(opts.layout)
    except ValueError as err:
        raise VragError(f"ingest.layout: {err}") from None
    backend.check(opts)
    if opts.ocr == "paddleocr":
        from vrag_data.ingest.paddleocr import check_paddleocr

        check_paddleocr(opts.paddleocr)


def plan_jobs(files: list[str], ws: Workspace, opts: IngestOptions) -> tuple[list[DocJob], list[DocStats], list[IngestError]]:
    """Decide per file: skip (same bytes, same settings), (re-)ingest, or refuse (another file owns the stem)."""
    jobs: list[DocJob] = []
    skipped: list[DocStats] = []
    errors: list[IngestError] = []
    claimed: dict[str, tuple[str, str]] = {}  # stem -> (path, doc_id) within this run
    want = ingest_hash(opts)
    for path in files:
        stem = inert_stem(Path(path).stem)  # a file name is outside text: it names every page id of the document
        try:
            doc_id, n_bytes = sha256_file(path), Path(path).stat().st_size
        except OSError as err:
            errors.append(IngestError(path=path, stage="open", reason=f"cannot read file: {err.strerror or err}"))
            continue
        if stem in claimed:
            other, other_id = claimed[stem]
            if other_id == doc_id:
                skipped.append(DocStats(path=path, stem=stem, doc_id=doc_id, status="unchanged"))
            else:
                errors.append(IngestError(path=path, stage="plan", reason=(
                    f"stem '{stem}' is already taken by {other} in this run (page ids would clash); rename one of them")))
            continue
        claimed[stem] = (path, doc_id)
        existing = load_document(ws, stem)
        if existing is not None and existing.doc_id == doc_id and existing.ingest_hash == want:
            skipped.append(DocStats(path=path, stem=stem, doc_id=doc_id, status="unchanged", n_pages=existing.n_pages))
            continue
        if existing is not None and existing.doc_id != doc_id and existing.source_path != path:
            errors.append(IngestError(path=path, stage="plan", reason=(
                f"stem '{stem}' already holds {existing.source_path} (different content) in this workspace; "
                f"rename {Path(path).name} or remove the old document")))
            continue
        jobs.append(DocJob(path=path, stem=stem, doc_id=doc_id, n_bytes=n_bytes, kind=input_kind(path), ws_root=ws.root, opts=opts))
    return jobs, skipped, errors


MIN_PART_PAGES = 16  # a part smaller than this costs more in start-up (opening, model warm-up) than it saves
SHARE_PER_WORKER = 2  # each range takes 1/(2 workers) of the pages still unassigned: big first, small at the end


def page_ranges(n: int, workers: int, min_pages: int = MIN_PART_PAGES) -> list[tuple[int, int]]:
    """1-based inclusive ranges covering pages 1..n, shrinking as the document is handed out (guided
    scheduling): pages differ in cost, so the last ranges are small and no worker is left with a long tail."""
    out: list[tuple[int, int]] = []
    first = 1
    while first <= n:
        left = n - first + 1
        size = max(min_pages, -(-left // (SHARE_PER_WORKER * workers)))
        if left - size < min_pages // 2:  # a remainder too small for a range of its own joins this one
            size = left
        out.append((first, first + size - 1))
        first += size
    return out


def split_job(job: DocJob, opts: IngestOptions, workers: int) -> list[DocJob]:
    """Page ranges of one big PDF for `workers` processes (several per worker, for balance), or [] to keep it
    whole: small documents, one worker, or a layout/OCR engine that runs per document (MinerU, PaddleOCR)."""
    if (workers <= 1 or opts.split_pages is None or job.kind != "pdf" or get_backend(opts.layout).per_document
            or opts.ocr == "paddleocr"):
        return []
    try:
        pymupdf = import_pymupdf(layout=False)
        with pymupdf.open(job.path, filetype="pdf") as doc:
            total = 0 if doc.needs_pass else doc.page_count
    except Exception:  # noqa: BLE001 - the document's own worker reports why it cannot be opened
        return []
    n = min(total, opts.max_pages or total)
    if n <= opts.split_pages:
        return []
    return [replace(job, pages=r, n_planned=n) for r in page_ranges(n, workers)]


def _init_worker(layout: bool, threads: int, parent_pid: int) -> None:
    from vrag_data.ingest.render import import_pymupdf

    # the parent decides when to stop (Ctrl-C reaches the whole process group: a worker would die mid-document with a
    # traceback) and a worker never outlives it, even after `kill -9` of the parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    import_pymupdf(layout, layout_threads=threads)


PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
PART_SHARE = 0.99  # the parts of a split document move the bar this far; its stitch (the write) the rest


def _progress(enabled: bool) -> Any:
    return progress_for("ingest", enabled, every=PROGRESS_EVERY, make_bar=lambda: Progress(
        TextColumn("[bold]ingest[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[pages]} pages"),
        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        console=_console, disable=not enabled, transient=False,
    ))


def _fail_fast(summary: IngestSummary, ws: Workspace) -> None:
    append_errors(ws, summary.errors)
    first = next((e for e in summary.errors if e.stage != "notice"), summary.errors[0])
    where = f" page {first.page}" if first.page else ""
    raise IngestFailed(f"{first.path}{where}: {first.reason} (strict mode stops at the first error)", exit_code=2)


_CRASHED = ("the worker process died on this file alone (a crash inside the PDF library: the file is likely "
            "malformed); re-save it with a PDF tool, or leave it out")


def _why(err: BaseException) -> str:
    if isinstance(err, BrokenProcessPool):  # after `_alone`: this document crashed its own process
        return _CRASHED
    return f"worker process failed: {type(err).__name__}: {(str(err).splitlines() or [''])[0]}"


def _outcome(fut: Future[DocOutcome], job: DocJob) -> DocOutcome:
    """A worker that dies (e.g. a native crash inside MuPDF) costs its document, not the whole batch."""
    try:
        return fut.result()
    except Exception as err:  # noqa: BLE001 - BrokenProcessPool and friends
        reason = _why(err)
        stats = DocStats(path=job.path, stem=job.stem, doc_id=job.doc_id, status="failed", n_errors=1)
        return DocOutcome(stats=stats, errors=[IngestError(path=job.path, stage="ingest", reason=reason)])


def _part(fut: Future[PartOutcome], job: DocJob) -> PartOutcome:
    try:
        return fut.result()
    except Exception as err:  # noqa: BLE001 - a dead worker costs the document (written whole or not at all)
        pages = f"pages {job.pages[0]}-{job.pages[1]}" if job.pages else "a part"
        reason = f"{pages}: {_why(err)}"
        return PartOutcome([], [IngestError(path=job.path, stage="ingest", reason=reason)], None, failed=True)


def _absorb(summary: IngestSummary, out: DocOutcome) -> None:
    summary.docs.append(out.stats)
    summary.errors.extend(out.errors)
    if out.stats.status == "ingested":
        summary.n_docs += 1
        summary.n_pages += out.stats.n_pages


class _Tracker:
    """The ingest's bar and summary as documents, their pages and their parts come back. The skipped documents are the
    task's start, not an advance: rate and ETA count this run's documents only."""

    def __init__(self, bar: Any, ws: Workspace, opts: IngestOptions, summary: IngestSummary, n_done: int, total: int) -> None:
        self.bar, self.ws, self.opts, self.summary, self.n_done = bar, ws, opts, summary, n_done
        self.task = bar.add_task("ingest", total=total, completed=n_done, pages=0, last="")
        self.credit: dict[str, float] = {}  # stem -> share of one split document its parts have shown on the bar

    def shown(self) -> float:
        """Documents done plus the shown share of unfinished ones (a whole number again once parts are stitched)."""
        return self.n_done + sum(self.credit.values())

    def done(self, out: DocOutcome) -> None:
        """One document back: its errors recorded (replacing an earlier ingest's when it is ingested now)."""
        _absorb(self.summary, out)
        if out.stats.status == "ingested":
            replace_errors(self.ws, out.stats.path, out.errors)
        elif out.errors:
            append_errors(self.ws, out.errors)
        self.n_done += 1
        self.credit.pop(out.stats.stem, None)
        self.bar.update(self.task, completed=self.shown(), pages=self.summary.n_pages, last=out.stats.stem[:40])
        if self.opts.strict and any(e.stage != "notice" for e in out.errors):  # notices do not stop a strict run
            _fail_fast(self.summary, self.ws)

    def page(self, stem: str, k: int, n: int) -> None:
        """A long document in this process moves the bar by its pages."""
        self.credit[stem] = k / max(1, n) * PART_SHARE
        self.bar.update(self.task, completed=self.shown(), pages=self.summary.n_pages + k, last=f"{stem[:40]} page {k}/{n}")

    def part(self, job: DocJob, in_parts: int) -> None:
        """A part of a split document is back (one big PDF alone still shows a rate and ETA)."""
        assert job.pages is not None
        share = (job.pages[1] - job.pages[0] + 1) / max(1, job.n_planned) * PART_SHARE
        self.credit[job.stem] = self.credit.get(job.stem, 0.0) + share
        self.bar.update(self.task, completed=self.shown(), pages=self.summary.n_pages + in_parts, last=f"{job.stem[:40]} (part)")


def _in_processes(jobs: list[DocJob], ranges: dict[str, list[DocJob]], workers: int, threads: int, opts: IngestOptions,
                  track: _Tracker) -> None:
    """The documents (big ones as page ranges) on a pool of `workers` processes; a split document is stitched when its
    last part is back. Ctrl-C, SIGTERM or a strict-mode stop drops the running documents (a re-run redoes them: a
    document is written whole or not at all)."""
    ctx = multiprocessing.get_context("spawn")  # fork after threads (onnxruntime, Prefect) can deadlock
    init = (get_backend(opts.layout).loads_layout_model, threads, os.getpid())
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=init) as pool:
        owner: dict[Future[Any], DocJob] = {}
        parts: dict[str, list[PartOutcome]] = {}  # stem -> parts back so far
        n_parts: dict[str, int] = {}
        started: dict[str, float] = {}
        for j in jobs:
            if ranges[j.stem]:
                n_parts[j.stem], parts[j.stem], started[j.stem] = len(ranges[j.stem]), [], time.perf_counter()
                owner.update({pool.submit(ingest_part, replace(r, threads=threads)): r for r in ranges[j.stem]})
            else:
                owner[pool.submit(ingest_document, j)] = j
        pending = set(owner)
        taken_down: list[DocJob] = []  # documents of a pool a crashing worker broke: each is run again alone

        def back(fut: Future[Any], job: DocJob) -> None:
            if job.pages is None:
                track.done(_outcome(fut, job))
                return
            parts[job.stem].append(_part(fut, job))
            track.part(job, sum(len(p.pages) for ps in parts.values() for p in ps))
            if len(parts[job.stem]) == n_parts[job.stem]:  # the last part is back: one document
                whole = replace(job, pages=None)
                track.done(stitch_parts(whole, parts.pop(job.stem), time.perf_counter() - started[job.stem]))

        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    if isinstance(fut.exception(), BrokenProcessPool):
                        taken_down.append(owner[fut])
                    else:
                        back(fut, owner[fut])
            # A native crash (MuPDF on a malformed file) kills one worker and breaks the pool: every document it
            # held fails with it. Each is run again in a process of its own, so only the one that crashes fails.
            for job in taken_down:
                back(_alone(job, ctx, init, threads), job)
        except BaseException:
            terminate_pool(pool)  # first: shutdown() forgets the worker processes
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _alone(job: DocJob, ctx: Any, init: tuple[Any, ...], threads: int) -> Future[Any]:
    """`job` done in a pool of one process of its own (its outcome, or the exception its crash raised)."""
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker, initargs=init) as pool:
        fut = pool.submit(ingest_document, job) if job.pages is None else pool.submit(ingest_part, replace(job, threads=threads))
        wait([fut])
        return fut


def ingest_paths(paths: list[str], ws: Workspace, opts: IngestOptions, progress: bool = True) -> IngestSummary:
    """Ingest PDFs/images (files or folders) into the workspace. Bad inputs become IngestErrors in
    `corpus/errors.parquet` and the batch goes on (unless `opts.strict`)."""
    t0 = time.perf_counter()
    outside: list[tuple[str, str]] = []
    files = discover_inputs(paths, opts.follow_symlinks, outside)
    check_components(opts)
    ws.makedirs()
    if ws.is_local:
        remove_orphan_temp_images(ws.pages.removeprefix("file://"))  # a killed ingest's half-written images
    jobs, skipped, plan_errors = plan_jobs(files, ws, opts)
    summary = IngestSummary(n_skipped_unchanged=len(skipped), docs=list(skipped), errors=list(plan_errors))
    summary.errors += [IngestError(path=p, stage="open", reason=why.removeprefix("error: ")) if why.startswith("error: ")
                       else IngestError(path=p, stage="notice", reason=why) for p, why in outside]
    if opts.strict and summary.errors:
        _fail_fast(summary, ws)
    append_errors(ws, summary.errors)  # written as they happen: a killed batch keeps them
    jobs.sort(key=lambda j: -j.n_bytes)  # big documents first keeps the pool busy to the end
    ranges = {j.stem: split_job(j, opts, opts.workers) for j in jobs}  # big PDFs: page ranges over the workers
    workers = min(opts.workers, sum(len(r) or 1 for r in ranges.values()))
    # Fewer documents than workers (one big PDF): the running workers get the idle cores' threads.
    threads = opts.ocr_threads or default_threads(max(1, workers))
    for job in jobs:
        job.threads = threads
    with _progress(progress) as bar:
        track = _Tracker(bar, ws, opts, summary, n_done=len(files) - len(jobs), total=len(files))
        if jobs:  # a long stage says at once that it started (its first document may take minutes)
            announce(bar, f"ingest: {len(jobs)} document(s) to ingest on {max(1, workers)} worker(s), "
                          f"{track.n_done} already done; a progress line every {line_every(PROGRESS_EVERY):g}s")
        if workers <= 1:
            for job in jobs:
                track.done(ingest_document(job, on_page=lambda k, n, stem=job.stem: track.page(stem, k, n)))
        else:
            _in_processes(jobs, ranges, workers, threads, opts, track)
    append_errors(ws, summary.errors)
    summary.seconds = round(time.perf_counter() - t0, 3)
    return summary
