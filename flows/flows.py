"""Prefect flows: `synth` (the whole pipeline for a config), `ingest`, `export`, `report`, `train`.

Each deployed flow takes the path of a run config (YAML) and optional overrides. It loads the config, then
runs its stages in an inner flow whose task runner comes from the config (`runner.kind`, `--runner`): the
task runner of a flow is fixed when it starts, and the config is only known from the parameters. Shard
tasks that fail after their retries are reported in the artifact and in `<workspace>/pipeline.json`; the
other shards and the later stages still run, and the flow run then ends Failed, so a re-run (which skips
every finished shard) retries only what failed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows import stages
from flows.artifacts import publish
from flows.runner import describe_runner, make_task_runner, resolve_runner
from vrag_data.config import RunConfig, load_config
from vrag_data.export.formats import all_formats
from vrag_data.config_check import check_run_config
from vrag_data.errors import VragError
from vrag_data.recipe import resolve_recipe
from vrag_data.store.run import RunDir
from vrag_data.store.workspace import Workspace

SUMMARY_FILE = "pipeline.json"


@contextmanager
def _reason_logged() -> Iterator[None]:
    """A failing flow says why in one line in its run logs (which `prefect deployment run --watch` and
    `prefect flow-run logs` show), besides Prefect's own traceback."""
    try:
        yield
    except Exception as err:
        get_run_logger().error("failed: %s", " ".join(str(err).split())[:2000] or type(err).__name__)
        raise


class ShardsFailed(VragError):
    """Some shards failed after their retries (the others finished and were kept)."""


def load(config: str | None, workspace: str | None = None, runner: str | None = None) -> tuple[RunConfig, Workspace]:
    cfg = load_config(config)
    check_run_config(cfg, config or "<defaults>")  # recipes, roles, endpoints, input files: before any work
    if workspace:
        cfg = cfg.model_copy(update={"workspace": workspace})
    root = cfg.workspace if "://" in cfg.workspace else str(Path(cfg.workspace).expanduser().resolve())
    cfg = cfg.model_copy(update={"workspace": root, "runner": resolve_runner(cfg.runner, runner)})
    return cfg, Workspace(root).makedirs()


def _summary(ctx: stages.Ctx, config: str | None, **extra: Any) -> dict[str, Any]:
    shards = [{**asdict(s), "failed": s.failed} for s in ctx.states]
    return {"workspace": ctx.ws.root, "config": config and str(Path(config).resolve()), "runner": describe_runner(ctx.cfg.runner),
            "shards": shards, **extra}


def _exports(runs: dict[str, str], out_dirs: dict[str, str]) -> dict[str, dict[str, str]]:
    out = {}
    for recipe, run_id in runs.items():
        d = out_dirs.get(run_id)
        if d:
            out[recipe] = {"recipe": recipe, "run_id": run_id, "dir": d, **{f.name: f"{d}/{f.entry}" for f in all_formats()}}
    return out


def _finish(key: str, title: str, ws: Workspace, summary: dict[str, Any]) -> dict[str, Any]:
    summary["markdown"] = publish(key, title, summary)
    if ws.is_local:
        path = Path(ws.root) / SUMMARY_FILE
        tmp = path.with_name(f".tmp-{os.getpid()}-{SUMMARY_FILE}")
        tmp.write_text(json.dumps({k: v for k, v in summary.items() if k != "markdown"}, indent=2, default=str))
        os.replace(tmp, path)
    failed = [s for s in summary["shards"] if s["failed"]]
    log = get_run_logger()  # the outcome in this flow run's own logs (`prefect flow-run logs`), not only its subflow's
    log.info("%s: %d shard(s) done, %d failed", key.removesuffix("-summary"), len(summary["shards"]) - len(failed), len(failed))
    for recipe, e in summary.get("exports", {}).items():
        log.info("export %s (run %s): %s", recipe, e["run_id"], e["dir"])
    if failed:
        raise ShardsFailed(f"{len(failed)} shard(s) failed after retries (others kept): "
                           + "; ".join(f"{s['stage']} {s['label']}: {s['message']}" for s in failed[:3]))
    return summary


@flow(name="synth-shards")
def synth_shards(cfg: RunConfig) -> dict[str, Any]:
    # the flow is the entry point: it resolves each recipe once and the stages pass the objects to their tasks
    recipes = [resolve_recipe(n, cfg) for n in cfg.synth.recipes]  # names, or `module:ATTR` references
    ctx = stages.Ctx(Workspace(cfg.workspace), cfg, recipes={r.name: r for r in recipes})
    paths, qa = stages.sources(ctx)
    stages.ingest(ctx, paths)
    stages.index(ctx)
    found = stages.tasks(ctx, qa)
    runs = stages.synth(ctx, found)
    out_dirs = stages.postprocess(ctx, runs)
    report = stages.report(ctx)
    return _summary(ctx, None, tasks=len(found), runs=runs, exports=_exports(runs, out_dirs), report=report)


@flow(name="synth", log_prints=True)
def synth(config: str, workspace: str | None = None, runner: str | None = None) -> dict[str, Any]:
    """The whole pipeline for a config: (sample corpus) -> ingest -> index -> tasks -> episodes per recipe and task
    shard -> judge, filters, augmentations -> exports -> report."""
    with _reason_logged():
        cfg, ws = load(config, workspace, runner)
        inner = synth_shards.with_options(task_runner=make_task_runner(cfg.runner))
        summary = inner(cfg)
        summary["config"] = str(Path(config).resolve())
        return _finish("synth-summary", f"synth: {Path(config).name}", ws, summary)


@flow(name="ingest-shards")
def ingest_shards(cfg: RunConfig) -> dict[str, Any]:
    ctx = stages.Ctx(Workspace(cfg.workspace), cfg)
    paths, qa = stages.sources(ctx)
    stages.ingest(ctx, paths)
    stages.index(ctx)
    n = len(stages.tasks(ctx, qa)) if qa else 0
    return _summary(ctx, None, tasks=n, report=stages.report(ctx))


@flow(name="ingest", log_prints=True)
def ingest(config: str, workspace: str | None = None, runner: str | None = None) -> dict[str, Any]:
    """Documents -> pages, layout, OCR (one task per shard of documents), then the search index (and the QA file's tasks)."""
    with _reason_logged():
        cfg, ws = load(config, workspace, runner)
        summary = ingest_shards.with_options(task_runner=make_task_runner(cfg.runner))(cfg)
        summary["config"] = str(Path(config).resolve())
        return _finish("ingest-summary", f"ingest: {Path(config).name}", ws, summary)


@flow(name="export-shards")
def export_shards(cfg: RunConfig, runs: list[str]) -> dict[str, Any]:
    ctx = stages.Ctx(Workspace(cfg.workspace), cfg)
    out_dirs = stages.export_runs(ctx, runs)
    by_recipe = {r: r for r in out_dirs}
    return _summary(ctx, None, runs=by_recipe, exports=_exports(by_recipe, out_dirs), report=stages.report(ctx))


@flow(name="export", log_prints=True)
def export(config: str, workspace: str | None = None, runs: list[str] | None = None, runner: str | None = None) -> dict[str, Any]:
    """Exports (HF datasets, LLaMA-Factory, verl, EasyR1) of the given runs (default: every run of the workspace)."""
    with _reason_logged():
        cfg, ws = load(config, workspace, runner)
        if not runs:
            root = Path(ws.runs)
            runs = sorted(p.name for p in root.iterdir() if RunDir(str(p)).has_manifest()) if root.is_dir() else []
        if not runs:
            raise VragError(f"{ws.runs}: no runs to export; run the synth flow first")
        summary = export_shards.with_options(task_runner=make_task_runner(cfg.runner))(cfg, runs)
        summary["config"] = str(Path(config).resolve())
        return _finish("export-summary", f"export: {Path(config).name}", ws, summary)


@flow(name="report", log_prints=True)
def report(config: str | None = None, workspace: str | None = None) -> dict[str, Any]:
    """report.duckdb + report.html of the workspace, and its summary table as an artifact."""
    with _reason_logged():
        cfg, ws = load(config, workspace)
        ctx = stages.Ctx(ws, cfg)
        summary = _summary(ctx, config, report=stages.report(ctx))
        return _finish("report-summary", f"report: {ws.root}", ws, summary)


@flow(name="train", log_prints=True)
def train(config: str, mode: str = "sft", data: str | None = None, workspace: str | None = None, output: str | None = None,
          max_steps: int | None = None) -> dict[str, Any]:
    """The bundled trainer (`vrag-data train sft|rl`) on an export, as one task; the artifact holds its final metrics."""
    with _reason_logged():
        from prefect.artifacts import create_markdown_artifact

        from flows.tasks import train as train_task

        res = train_task(config, mode, data, workspace, output, max_steps)
        rows = "\n".join(f"| {k} | {v} |" for k, v in res.items())
        create_markdown_artifact(markdown=f"# train {mode}: {Path(config).name}\n\n| key | value |\n|---|---|\n{rows}\n",
                                 key=f"train-{mode}-summary", description=f"train {mode}")
        return res
