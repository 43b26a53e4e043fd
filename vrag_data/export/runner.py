"""`export_run`: one streaming pass over a run's kept trajectories (SFT), then one over its tasks (RL), each record
handed to every selected format that takes it; then each format's warnings, card section and publish step.

Images are materialised once into `<out>/images/`; each format writes its own shards as records arrive.
Records that cannot be converted are skipped with a counted reason (`skipped.jsonl`, the card, the summary).
The recipes' export hints come from the run manifest or from the resolved recipes the caller passes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_data.config import ExportConfig
from vrag_data.env.geometry import FAMILIES
from vrag_data.errors import ConfigError, VragError
from vrag_data.export.card import card_body, front_matter, publish_problems, run_roles, source_licenses
from vrag_data.export.formats import Format, FormatContext, FormatWriter, Written, resolve_formats
from vrag_data.export.hints import RecipeHints
from vrag_data.export.images import ImageStore
from vrag_data.export.io import write_json, write_text
from vrag_data.export.rl_items import RlSource, rl_items
from vrag_data.export.search import write_search
from vrag_data.export.sft_records import PageSizes, answer_evidence, sft_records
from vrag_data.export.summary import ExportSummary, RunStats, Skips, register_export
from vrag_data.schema.records import Task, Trajectory
from vrag_data.store import Workspace, read_records
from vrag_data.store.run import ExportLock, RunDir, stale_hint

if TYPE_CHECKING:
    from vrag_data.recipe.base import Recipe

__all__ = ["ExportSummary", "NothingToExport", "export_run"]


def export_run(
    ws: Workspace,
    run_id: str,
    formats: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    model_family: str = "qwen2.5-vl",
    shard_size: int | None = None,
    config: ExportConfig | None = None,
    on_trajectory: Callable[[], None] | None = None,
    recipes: Sequence["Recipe"] = (),
    overwrite: bool = False,
) -> ExportSummary:
    """Export run `run_id` in `formats` (default: the config's). `recipes`: the resolved recipes whose hints the
    run manifest does not record (entry points resolve them; the export looks nothing up by name). An output folder
    holding another run's export is refused unless `overwrite` (then it is replaced whole)."""
    cfg = config or ExportConfig()
    try:
        selected = resolve_formats(list(cfg.formats) if formats is None else formats)
    except ConfigError as err:
        raise VragError(str(err)) from None
    if model_family not in FAMILIES:
        raise VragError(f"unknown model family {model_family!r}; choose from {list(FAMILIES)}")
    run_dir = ws.run(run_id)
    run = RunDir(run_dir)
    if not run.exists():
        raise VragError(f"{run_dir}: run not found; list runs under {ws.runs} or run `vrag-data synth` first")
    state, why = run.verdict_state()
    if state == "stale":
        raise VragError(f"{stale_hint(run_id, why, ws.root)} before exporting")  # the report's line, word for word
    if out_dir is None and not ws.is_local:
        raise VragError(f"{ws.root}: exports are written to a local folder; pass --out")
    out = Path(out_dir) if out_dir is not None else Path(ws.exports) / run_id
    _check_out(out, run_id, overwrite)
    fresh = not out.is_dir() or not any(p.name != ".export.lock" for p in out.iterdir())
    out.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(run_id=run_id, out_dir=str(out), formats=[f.name for f in selected], model_family=model_family)
    if state == "missing":
        summary.warnings.append(f"{run.verdicts_dir}: no verdicts; every trajectory with status 'answered' is kept (run `vrag-data filter` first)")
    with ExportLock(out):
        if overwrite:
            _empty(out)
        (out / OWNER_FILE).write_text(run_id + "\n")  # before any file: an interrupted export still names its run
        skips = Skips()
        ctx = FormatContext(out, int(shard_size or cfg.shard_size), model_family, cfg, ImageStore(ws, out, model_family),
                            skips.add, RecipeHints(run, cfg, recipes))
        try:
            _export(ws, run, selected, ctx, skips, summary, on_trajectory)
        except NothingToExport:
            _empty(out)  # what the export began (format folders, images): no half-written export stays behind
            if fresh:
                shutil.rmtree(out, ignore_errors=True)
            raise
        register_export(ws, out)
    return summary


class NothingToExport(VragError):
    """No selected format would get a record: the export stops (one line, non-zero exit) instead of writing empty
    splits whose configs send a trainer looking for data elsewhere."""


def _export(ws: Workspace, run: RunDir, selected: list[Format], ctx: FormatContext, skips: Skips, summary: ExportSummary,
            on_trajectory: Callable[[], None] | None) -> None:
    pages = PageSizes(ws)
    stats = RunStats()
    # formats that take SFT records open now; the others once the SFT pass has told whether RL prompts carry images
    writers: dict[str, FormatWriter] = {f.name: f.open(ctx) for f in selected if f.sft}
    tasks = {t.task_id: t for t in read_records(ws.tasks, Task)}
    sources = _sft_pass(run, [f for f in selected if f.sft], writers, ctx, pages, stats, summary, skips, on_trajectory,
                        {tid: t.split or "train" for tid, t in tasks.items()})
    if summary.n_kept == 0:
        summary.warnings.append(f"run {summary.run_id}: no kept trajectories; the export has empty splits")

    ctx.rl_with_images = any(m.images for src in sources.values() for m in src.prompt)
    writers.update({f.name: f.open(ctx) for f in selected if f.rl and not f.sft})
    recipes = sorted({r for _, r in sources})
    for f in selected:
        summary.warnings += f.warnings(ctx, recipes)
    held_out = validation_tasks((tid for tid, _ in sources), tasks, ctx.cfg.val_share, ctx.cfg.val_seed)
    n_rl = 0
    searched = False  # some RL row starts without its pages: the episode retrieves them (search/)
    for item in rl_items(sources, tasks, ws.tasks, ctx.hints, ctx.store, pages, skips.add, ctx.cfg.ability, ctx.family):
        n_rl += 1
        searched = searched or not item.refs
        if item.task.task_id in held_out:  # every RL format (and the HF rl split) sees the same validation tasks
            item.rec.extra_info["split"] = VAL_SPLIT
            item.task = item.task.model_copy(update={"split": VAL_SPLIT})
        for f in selected:
            if f.rl:
                writers[f.name].write_rl(item)

    n_sft = sum(stats.per_recipe.values())
    if n_sft == 0 and not (n_rl and any(f.rl for f in selected)):
        statuses = ", ".join(f"{k}={v}" for k, v in sorted(stats.per_status.items())) or "none"
        raise NothingToExport(
            f"run {summary.run_id}: nothing to export ({summary.n_kept} of {summary.n_trajectories} trajectories kept; "
            f"statuses: {statuses}; no SFT record or RL row for {', '.join(f.name for f in selected)}); no export written")
    written: dict[str, Written] = {}
    for f in selected:
        written[f.name] = w = writers[f.name].close()
        summary.warnings += w.warnings
        summary.counts[f.name] = w.counts
        if w.files:
            summary.stats.setdefault("files", {})[f.name] = w.files
        if w.splits or (f.rl and not f.sft):  # an RL-only format counts its records per split
            summary.stats.setdefault("splits", {})[f.name] = w.splits or {"rl": dict(w.counts)}
    if searched and any(f.rl for f in selected):
        summary.stats["search"] = write_search(ws, ctx.out, ctx.cfg.search_pages, summary.warnings.append)
    summary.skipped = dict(skips.counts)
    summary.stats.update(stats.stats(ctx.store.written + ctx.store.reused, ctx.store.written, n_rl))
    summary.provenance = stats.provenance(summary.run_id)
    summary.stats["validation"] = {"tasks": len(held_out), "share": ctx.cfg.val_share, "seed": ctx.cfg.val_seed}
    m = run.manifest()
    summary.provenance.update(run_roles(m.config if m is not None else None))  # the card's "Roles" section
    _sources(summary, ctx, tasks, {tid for tid, _ in sources} | stats.task_ids)
    _finish(selected, ctx, written, skips, summary)


OWNER_FILE = ".export-run"  # the run an export folder belongs to (summary.json names it too, once finished)
VAL_SPLIT = "val"


def _owner(out: Path) -> str | None:
    """The run whose export `out` holds: `.export-run`, or summary.json of an export written before that file."""
    owner = out / OWNER_FILE
    if owner.is_file():
        return owner.read_text().strip() or None
    try:
        return str(json.loads((out / "summary.json").read_text()).get("run_id") or "") or None
    except (OSError, ValueError, AttributeError):
        return None


def _check_out(out: Path, run_id: str, overwrite: bool) -> None:
    """One folder, one run: a second run exported into the folder of another would leave a mix (a card and hf/ of
    one run beside the verl/ files of the other) that trainers read without a word."""
    if not out.is_dir():
        return
    names = [p.name for p in out.iterdir() if p.name != ".export.lock"]
    if not names:
        return
    owner = _owner(out)
    if owner == run_id:
        return
    if owner is None:
        raise VragError(f"{out}: not empty and not an export folder ({', '.join(sorted(names)[:3])}...); "
                        "pass an empty or new --out")
    if not overwrite:
        raise VragError(f"{out}: holds the export of run {owner}; pass --overwrite to replace it, or another --out")


def _empty(out: Path) -> None:
    for p in out.iterdir():
        if p.name == ".export.lock":
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def validation_tasks(task_ids: Iterable[str], tasks: dict[str, Task], share: float, seed: int) -> set[str]:
    """Train tasks held out as the RL validation set: a `share` of them (at least one when there are two or more, never
    all), chosen by a seeded hash of the task id, so every sample of a task is on one side and a re-export with the
    same seed picks the same tasks. None when some task is already outside the train split (its benchmark's)."""
    ids = sorted(set(task_ids))
    if share <= 0 or len(ids) < 2 or any((tasks[t].split if t in tasks else "train") != "train" for t in ids):
        return set()
    k = min(len(ids) - 1, max(1, round(share * len(ids))))
    ranked = sorted(ids, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
    return set(ranked[:k])


def _sft_pass(run: RunDir, sft_formats: list[Format], writers: dict[str, FormatWriter], ctx: FormatContext,
              pages: PageSizes, stats: RunStats, summary: ExportSummary, skips: Skips,
              on_trajectory: Callable[[], None] | None, splits: dict[str, str]) -> dict[tuple[str, str], RlSource]:
    """Every trajectory counted, every kept one converted once and handed to each SFT format; returns the RL
    sources: one trajectory's prompt per (task, recipe), from the RL keep-set in its order when the run's filter
    wrote one (`RunDir.rl_verdicts`: the recipe's RL chain), else from the SFT-kept trajectories. Each SFT record
    carries its task's split (`metadata["split"]`, "train" for a task gone from the workspace): a format writes a
    record of another split apart from its training files, never into them."""
    verdicts = run.verdicts()
    rl_verdicts = run.rl_verdicts()
    hints = ctx.hints
    sources: dict[tuple[str, str], RlSource] = {}
    ranked: list[tuple[tuple[float, int], tuple[str, str], RlSource]] = []

    def source(traj: Trajectory) -> RlSource:
        return RlSource(traj.recipe, traj.prompt, answer_evidence(traj), traj.extra.get("sufficient"),
                        str(traj.extra.get("coord_space") or ""))

    for traj in run.trajectories():
        summary.n_trajectories += 1
        stats.per_status[traj.status] += 1
        if on_trajectory:
            on_trajectory()
        if rl_verdicts is not None and traj.prompt and rl_verdicts.keep(traj):
            ranked.append((rl_verdicts.order_key(traj.traj_id, len(ranked)), (traj.task_id, traj.recipe), source(traj)))
        if not verdicts.keep(traj):
            continue
        summary.n_kept += 1
        stats.kept(traj)
        if rl_verdicts is None and traj.prompt:  # the RL row of a task is built from a kept trajectory's prompt
            sources.setdefault((traj.task_id, traj.recipe), source(traj))
        if not sft_formats:
            continue
        for conv, rec in sft_records(traj, ctx.family, hints.max_pixels(traj.recipe), pages, ctx.store, skips.add,
                                     hints.coord_words(traj.recipe), hints.crop_min_pixels(traj.recipe)):
            rec.metadata["split"] = splits.get(traj.task_id, "train")
            stats.record(conv, rec)
            for f in sft_formats:
                writers[f.name].write_sft(rec, conv.system)
    for _, key, src in sorted(ranked, key=lambda x: x[0]):  # the RL chain's order (quality-rejected first, simple first)
        sources.setdefault(key, src)
    return sources


def _sources(summary: ExportSummary, ctx: FormatContext, tasks: dict[str, Task], task_ids: set[str]) -> None:
    """The card's licence section: the export's licence, the documents and benchmarks of its tasks with theirs, and
    why publishing is refused (the hf format's publish step reads `ctx.publish_problems`)."""
    docs: set[str] = set()
    benchmarks: set[str] = set()
    for tid in task_ids:
        t = tasks.get(tid)
        if t is None:
            continue
        docs.update(t.doc_stems or [p.rsplit("_", 1)[0] for p in t.evidence_pages])
        if t.benchmark:
            benchmarks.add(t.benchmark)
    named = {"documents": sorted(docs), **({"benchmarks": sorted(benchmarks)} if benchmarks else {})}
    licenses = source_licenses(named, ctx.cfg.source_licenses)
    ctx.publish_problems = publish_problems(ctx.cfg.license, licenses, ctx.cfg.allow_research_only)
    summary.provenance.update({"license": ctx.cfg.license, "source_licenses": licenses,
                               "publish_problems": ctx.publish_problems})


def _finish(selected: list[Format], ctx: FormatContext, written: dict[str, Written], skips: Skips,
            summary: ExportSummary) -> None:
    """skipped.jsonl, the card (with each format's section), each format's publish step, then summary.json."""
    out = ctx.out
    write_text(out, out / "skipped.jsonl", skips.jsonl())
    card = card_body(summary.model_dump(), [f.card_section(written[f.name]) for f in selected])
    write_text(out, out / "README.md", front_matter({}, license=ctx.cfg.license) + card)
    for f in selected:
        f.publish(ctx, written[f.name], card)
    write_json(out, out / "summary.json", summary.model_dump(mode="json"))
