"""`export_run`: one streaming pass over a run's kept trajectories (SFT), then one over its tasks (RL), each record
handed to every selected format that takes it; then each format's warnings, card section and publish step.

Images are materialised once into `<out>/images/`; each format writes its own shards as records arrive.
Records that cannot be converted are skipped with a counted reason (`skipped.jsonl`, the card, the summary).
The recipes' export hints come from the run manifest or from the resolved recipes the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_data.config import ExportConfig
from vrag_data.env.geometry import FAMILIES
from vrag_data.errors import ConfigError, VragError
from vrag_data.export.card import card_body, front_matter
from vrag_data.export.formats import Format, FormatContext, FormatWriter, Written, resolve_formats
from vrag_data.export.hints import RecipeHints
from vrag_data.export.images import ImageStore
from vrag_data.export.io import write_json, write_text
from vrag_data.export.rl_items import RlSource, rl_items
from vrag_data.export.sft_records import PageSizes, answer_evidence, sft_record
from vrag_data.export.summary import ExportSummary, RunStats, Skips, register_export
from vrag_data.schema.records import Task
from vrag_data.store import Workspace, read_records
from vrag_data.store.run import ExportLock, RunDir, stale_hint

if TYPE_CHECKING:
    from vrag_data.recipe.base import Recipe

__all__ = ["ExportSummary", "export_run"]


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
) -> ExportSummary:
    """Export run `run_id` in `formats` (default: the config's). `recipes`: the resolved recipes whose hints the
    run manifest does not record (entry points resolve them; the export looks nothing up by name)."""
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
    out.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(run_id=run_id, out_dir=str(out), formats=[f.name for f in selected], model_family=model_family)
    if state == "missing":
        summary.warnings.append(f"{run.verdicts_dir}: no verdicts; every trajectory with status 'answered' is kept (run `vrag-data filter` first)")
    with ExportLock(out):
        skips = Skips()
        ctx = FormatContext(out, int(shard_size or cfg.shard_size), model_family, cfg, ImageStore(ws, out, model_family),
                            skips.add, RecipeHints(run, cfg, recipes))
        _export(ws, run, selected, ctx, skips, summary, on_trajectory)
        register_export(ws, out)
    return summary


def _export(ws: Workspace, run: RunDir, selected: list[Format], ctx: FormatContext, skips: Skips, summary: ExportSummary,
            on_trajectory: Callable[[], None] | None) -> None:
    pages = PageSizes(ws)
    stats = RunStats()
    # formats that take SFT records open now; the others once the SFT pass has told whether RL prompts carry images
    writers: dict[str, FormatWriter] = {f.name: f.open(ctx) for f in selected if f.sft}
    sources = _sft_pass(run, [f for f in selected if f.sft], writers, ctx, pages, stats, summary, skips, on_trajectory)
    if summary.n_kept == 0:
        summary.warnings.append(f"run {summary.run_id}: no kept trajectories; the export has empty splits")

    ctx.rl_with_images = any(m.images for src in sources.values() for m in src.prompt)
    writers.update({f.name: f.open(ctx) for f in selected if f.rl and not f.sft})
    recipes = sorted({r for _, r in sources})
    for f in selected:
        summary.warnings += f.warnings(ctx, recipes)
    tasks = {t.task_id: t for t in read_records(ws.tasks, Task)}
    n_rl = 0
    for item in rl_items(sources, tasks, ws.tasks, ctx.hints, ctx.store, pages, skips.add, ctx.cfg.ability, ctx.family):
        n_rl += 1
        for f in selected:
            if f.rl:
                writers[f.name].write_rl(item)

    written: dict[str, Written] = {}
    for f in selected:
        written[f.name] = writers[f.name].close()
        summary.counts[f.name] = written[f.name].counts
        if written[f.name].files:
            summary.stats.setdefault("files", {})[f.name] = written[f.name].files
    summary.skipped = dict(skips.counts)
    summary.stats.update(stats.stats(ctx.store.written + ctx.store.reused, ctx.store.written, n_rl))
    summary.provenance = stats.provenance(summary.run_id)
    _finish(selected, ctx, written, skips, summary)


def _sft_pass(run: RunDir, sft_formats: list[Format], writers: dict[str, FormatWriter], ctx: FormatContext,
              pages: PageSizes, stats: RunStats, summary: ExportSummary, skips: Skips,
              on_trajectory: Callable[[], None] | None) -> dict[tuple[str, str], RlSource]:
    """Every trajectory counted, every kept one converted once and handed to each SFT format; returns the RL
    sources: one kept trajectory's prompt per (task, recipe)."""
    verdicts = run.verdicts()
    hints = ctx.hints
    sources: dict[tuple[str, str], RlSource] = {}
    for traj in run.trajectories():
        summary.n_trajectories += 1
        stats.per_status[traj.status] += 1
        if on_trajectory:
            on_trajectory()
        if not verdicts.keep(traj):
            continue
        summary.n_kept += 1
        stats.kept(traj)
        if traj.prompt:  # the RL row of a task is built from a kept trajectory's prompt
            sources.setdefault((traj.task_id, traj.recipe), RlSource(traj.recipe, traj.prompt, answer_evidence(traj), traj.extra.get("sufficient"),
                                                                        str(traj.extra.get("coord_space") or "")))
        if not sft_formats:
            continue
        made = sft_record(traj, ctx.family, hints.max_pixels(traj.recipe), pages, ctx.store, skips.add,
                          hints.coord_words(traj.recipe), hints.crop_min_pixels(traj.recipe))
        if made is None:
            continue
        conv, rec = made
        stats.record(conv, rec)
        for f in sft_formats:
            writers[f.name].write_sft(rec, conv.system)
    return sources


def _finish(selected: list[Format], ctx: FormatContext, written: dict[str, Written], skips: Skips,
            summary: ExportSummary) -> None:
    """skipped.jsonl, the card (with each format's section), each format's publish step, then summary.json."""
    out = ctx.out
    write_text(out, out / "skipped.jsonl", skips.jsonl())
    card = card_body(summary.model_dump(), [f.card_section(written[f.name]) for f in selected])
    write_text(out, out / "README.md", front_matter({}) + card)
    for f in selected:
        f.publish(ctx, written[f.name], card)
    write_json(out, out / "summary.json", summary.model_dump(mode="json"))
