"""`export_run`: one streaming pass over a run's kept trajectories (SFT), then one over its tasks (RL), each record
handed to every selected format that takes it; then each format's warnings, card section and publish step.

Images are materialised once into `<out>/images/`; each format writes its own shards as records arrive. The folder
stays only when some format's rows name its files (an export whose formats all embed the bytes keeps none).
Records that cannot be converted are skipped with a counted reason (`skipped.jsonl`, the card, the summary).
The recipes' export hints come from the run manifest or from the resolved recipes the caller passes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_data.config import ExportConfig
from vrag_data.env.geometry import FAMILIES
from vrag_data.errors import ConfigError, VragError
from vrag_data.export.card import card_body, front_matter, publish_problems, run_roles, source_licenses
from vrag_data.export.gate import ExportGate, without_rejected
from vrag_data.export.formats import Format, FormatContext, FormatWriter, Written, resolve_formats, takes_sft_split
from vrag_data.export.hints import RecipeHints, refuse_target
from vrag_data.export.images import ImageStore
from vrag_data.export.io import write_json, write_text
from vrag_data.export.rl_items import RlSource, rl_items
from vrag_data.export.search import write_search
from vrag_data.export.sft_records import PageSizes, answer_evidence, sft_records
from vrag_data.export.summary import ExportSummary, RunStats, Skips, register_export
from vrag_data.schema.records import Task, Trajectory
from vrag_data.store import Workspace, read_records
from vrag_data.store.run import ExportLock, RunDir, Verdicts, stale_hint

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
    unfiltered: bool = False,
    target: str | None = None,
) -> ExportSummary:
    """Export run `run_id` in `formats` (default: the config's). `recipes`: the resolved recipes whose hints the
    run manifest does not record (entry points resolve them; the export looks nothing up by name). An output folder
    holding another run's export is refused unless `overwrite` (then it is replaced whole). A run whose last filter
    failed, was interrupted or is still running is refused unless `unfiltered`: then every answered episode is
    exported without the filter's verdicts (and without its augmentations), and the card and the report say so.
    Either way every record passes the recipe's gate (`vrag_data.export.gate`). `target`: the trainer the rows are
    tuned for (`--for`); a recipe whose hints say that trainer cannot run its loop (`not_for`) stops the export with
    one line, before any work when the run's manifest names its recipe (else nothing of the export is left)."""
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
    hints = RecipeHints(run, cfg, recipes)  # a run without a manifest names its recipes in its episodes: checked then
    refuse_target(hints, [m.recipe] if (m := run.manifest()) is not None else [], target)
    state, why = ("missing", "") if unfiltered else run.verdict_state()
    if not unfiltered:
        _check_filter(run, run_id, ws.root)
    if state == "stale":
        raise VragError(f"{stale_hint(run_id, why, ws.root)} before exporting")  # the report's line, word for word
    if out_dir is None and not ws.is_local:
        raise VragError(f"{ws.root}: exports are written to a local folder; pass --out")
    out = Path(out_dir) if out_dir is not None else Path(ws.exports) / run_id
    _check_out(out, run_id, overwrite)
    fresh = not out.is_dir() or not any(p.name != ".export.lock" for p in out.iterdir())
    out.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(run_id=run_id, out_dir=str(out), formats=[f.name for f in selected], model_family=model_family)
    if unfiltered:
        summary.warnings.append(f"run {run_id}: exported with --unfiltered: the filter's verdicts are not applied; every "
                                "answered episode that passes the recipe's gate is kept")
    elif state == "missing":
        summary.warnings.append(f"{run.verdicts_dir}: no verdicts; every trajectory with status 'answered' is kept (run `vrag-data filter` first)")
    summary.provenance["unfiltered"] = state == "missing"  # the card and the report state an export without verdicts
    with ExportLock(out):
        previous = Previous.set_aside(out)  # the earlier export stays whole until this one has finished
        try:
            (out / OWNER_FILE).write_text(run_id + "\n")  # before any file: an interrupted export still names its run
            skips = Skips()
            ctx = FormatContext(out, int(shard_size or cfg.shard_size), model_family, cfg, ImageStore(ws, out, model_family),
                                skips.add, hints, target=target)
            _export(ws, run, selected, ctx, skips, summary, on_trajectory, unfiltered)
        except NothingToExport as err:
            # a definite answer, not an accident: the earlier export no longer matches the run's verdicts and goes
            previous.empty()
            if fresh:
                shutil.rmtree(out, ignore_errors=True)
            elif previous.aside is not None:
                err.args = (f"{err.args[0]}; the earlier export in {out} was removed",)
            raise
        except BaseException:
            # a full disk, an interrupt: what this export began goes, the earlier one comes back
            previous.restore()
            if fresh:
                shutil.rmtree(out, ignore_errors=True)
            raise
        previous.drop()
        shutil.rmtree(out / ".tmp", ignore_errors=True)  # every shard is in place: the staging folder goes
        ctx.store.settle(replaced=overwrite)  # images/ only when a format names its files
        register_export(ws, out)
    return summary


ASIDE = ".previous-export"  # inside the export folder while a new export is written over an earlier one
KEPT = (".export.lock", "images", ASIDE)  # the lock; images are content-addressed (a file is whole or absent)


@dataclass
class Previous:
    """An earlier export in `out`, set aside (renamed, so it needs no space) while a new one is written: restored
    when the new one cannot finish, dropped when it has. Page images stay in place and are reused; an image the
    failed export added is removed again."""

    out: Path
    aside: Path | None
    images: set[str]

    @classmethod
    def set_aside(cls, out: Path) -> "Previous":
        stale = out / ASIDE
        if stale.is_dir():  # a process killed while writing over an earlier export: that export comes back first
            cls(out, stale, set()).restore(remove_new_images=False)
        images = {p.name for p in (out / "images").iterdir()} if (out / "images").is_dir() else set()
        names = [p for p in out.iterdir() if p.name not in KEPT]
        if not names:
            return cls(out, None, images)
        stale.mkdir()
        for p in names:
            p.rename(stale / p.name)
        return cls(out, stale, images)

    def restore(self, remove_new_images: bool = True) -> None:
        for p in list(self.out.iterdir()):
            if p.name in KEPT:
                continue
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        if remove_new_images and (self.out / "images").is_dir():
            for p in (self.out / "images").iterdir():
                if p.name not in self.images:
                    p.unlink(missing_ok=True)
        if self.aside is not None and self.aside.is_dir():
            for p in self.aside.iterdir():
                p.rename(self.out / p.name)
            self.aside.rmdir()

    def empty(self) -> None:
        """Everything but the lock goes: the new export and the earlier one, page images included."""
        for p in list(self.out.iterdir()):
            if p.name != ".export.lock":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()

    def drop(self) -> None:
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)


class NothingToExport(VragError):
    """No selected format would get a record: the export stops (one line, non-zero exit) instead of writing empty
    splits whose configs send a trainer looking for data elsewhere."""


def _check_filter(run: RunDir, run_id: str, workspace: str) -> None:
    """A filter that failed, was interrupted or still runs leaves no verdicts to trust: stop with one line."""
    status, detail = run.filter_state()
    again = f"run `vrag-data filter -w {workspace} --run {run_id}` again"
    if status == "running":
        raise VragError(f"run {run_id}: its filter is still running ({detail}); export once it has finished")
    if status in ("failed", "interrupted"):
        raise VragError(f"run {run_id}: its last filter {'failed' if status == 'failed' else 'did not finish'} "
                        f"({detail}); {again}, or pass --unfiltered to export without its verdicts")


def _export(ws: Workspace, run: RunDir, selected: list[Format], ctx: FormatContext, skips: Skips, summary: ExportSummary,
            on_trajectory: Callable[[], None] | None, unfiltered: bool = False) -> None:
    pages = PageSizes(ws)
    stats = RunStats()
    # formats that take SFT records open now; the others once the SFT pass has told whether RL prompts carry images
    writers: dict[str, FormatWriter] = {f.name: f.open(ctx) for f in selected if f.sft}
    tasks = {t.task_id: t for t in read_records(ws.tasks, Task)}
    gate = ExportGate(ctx.hints, pages, ctx.hints.max_pixels)
    sources = _sft_pass(run, [f for f in selected if f.sft], writers, ctx, pages, stats, summary, skips, on_trajectory,
                        {tid: t.split or "train" for tid, t in tasks.items()}, gate, unfiltered)
    refuse_target(ctx.hints, {r for _, r in sources} | set(stats.per_recipe), ctx.target)
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
        problems = gate.rl(item.rec)
        if problems:  # never written: counted with its reason like every record the gate stops
            gate.stopped(skips, "rl", item.recipe, item.rec.id, *problems[0])
            continue
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
        ctx.store.named = ctx.store.named or w.names_image_files
        summary.warnings += w.warnings
        summary.counts[f.name] = w.counts
        if w.files:
            summary.stats.setdefault("files", {})[f.name] = w.files
        if w.splits or (f.rl and not f.sft):  # an RL-only format counts its records per split
            summary.stats.setdefault("splits", {})[f.name] = w.splits or {"rl": dict(w.counts)}
    if searched and any(f.rl for f in selected):
        summary.stats["search"] = write_search(ws, ctx.out, ctx.cfg.search_pages, summary.warnings.append)
    summary.skipped = dict(skips.counts)
    summary.stats["gate"] = gate.counts()  # recipe -> "<kind>:<code>" -> records stopped (the report's export_gate)
    summary.stats.update(stats.stats(ctx.store.written + ctx.store.reused, ctx.store.written, n_rl))
    summary.provenance = {**stats.provenance(summary.run_id), "unfiltered": summary.provenance.get("unfiltered", False),
                          "gate": {name: g.describe() for name, g in sorted(gate.by_recipe.items())}}
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
              on_trajectory: Callable[[], None] | None, splits: dict[str, str],
              gate: ExportGate, unfiltered: bool = False) -> dict[tuple[str, str], RlSource]:
    """Every trajectory counted, every kept one converted once and handed to each SFT format; returns the RL
    sources: one trajectory's prompt per (task, recipe), from the RL keep-set in its order when the run's filter
    wrote one (`RunDir.rl_verdicts`: the recipe's RL chain), else from the SFT-kept trajectories. Each SFT record
    carries its task's split (`metadata["split"]`, "train" for a task gone from the workspace): a format writes a
    record of another split apart from its training files, never into them."""
    verdicts = Verdicts() if unfiltered else run.verdicts()  # no verdicts: every answered episode
    rl_verdicts = None if unfiltered else run.rl_verdicts()
    hints = ctx.hints
    sources: dict[tuple[str, str], RlSource] = {}
    ranked: list[tuple[tuple[float, int], tuple[str, str], RlSource]] = []

    def source(traj: Trajectory) -> RlSource:
        return RlSource(traj.recipe, traj.prompt, answer_evidence(traj), traj.extra.get("sufficient"),
                        str(traj.extra.get("coord_space") or ""))

    for traj in (run.episodes() if unfiltered else run.trajectories()):  # augmentations come from the filter
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
        split = splits.get(traj.task_id, "train")
        targets = [f for f in sft_formats if takes_sft_split(f, split)]
        if not targets:  # no selected format writes this split's records: none made, no image materialised
            continue
        accepted, n_dropped = (traj, 0) if gate.trains_retries(traj.recipe) else without_rejected(traj)
        for conv, rec in sft_records(accepted, ctx.family, hints.max_pixels(traj.recipe), pages, ctx.store, skips.add,
                                     hints.coord_words(traj.recipe), hints.crop_min_pixels(traj.recipe)):
            rec.metadata["rejected_turns_dropped"] = n_dropped
            problems = gate.sft(accepted, rec)
            if problems:  # the recipe's gate: a record that is not a clean training sample is never written
                code, why = problems[0]
                gate.stopped(skips, "sft", traj.recipe, rec.id, code, f"trajectory {traj.traj_id}: {why}")
                continue
            rec.metadata["split"] = split
            stats.record(conv, rec)
            for f in targets:
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
