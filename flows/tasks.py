"""Prefect tasks: each runs ONE library stage on ONE shard (a set of documents, a set of tasks, one run).

The functions take plain, picklable arguments (paths, pydantic sections, ids, and the configured `Recipe` object
that the flow resolved: a worker never looks a recipe up by name, so a recipe defined in code runs there too) so
they run the same in a thread here or in a Ray worker on another node (the workspace is then a URL every node can reach). Each takes a `key`
argument built by the flow (`flows.keys.stage_key`): the `ShardKey` cache policy uses it, so a finished shard
is not run again. Retries, result storage and the cache policy are bound at run time (`flows.flows`), because
they come from the run config. Results are small summaries (counts, paths), never the data itself.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from flows.keys import ShardKey
from vrag_data.config import ExportConfig, IndexConfig, IngestConfig, RunConfig
from vrag_data.errors import VragError
from vrag_data.recipe.base import Recipe
from vrag_data.store.workspace import Workspace

SHARD_CACHE = ShardKey()


class _ToTaskLogs(logging.Handler):
    """Progress lines of the library (`vrag_data.progress`) also go to the logs of the task run that made them, once:
    the library writes its stderr copy without print() (so `log_prints` does not log it again) and the progress
    logger does not propagate (the root console handler would show it a second time)."""

    def emit(self, record: logging.LogRecord) -> None:
        ctx = TaskRunContext.get()
        if ctx is None:
            return
        root = _root_flow_run(str(ctx.task_run.flow_run_id))
        # filed under the flow run a user started (the deployment's), not the inner flow that picked the task runner:
        # `prefect deployment run ... --watch` follows that run's logs only; the task run's own log view keeps them too
        get_run_logger().info(record.getMessage(), extra={"flow_run_id": root} if root else {})


@functools.lru_cache(maxsize=64)
def _root_flow_run(flow_run_id: str) -> str | None:
    """The outermost flow run above `flow_run_id` (walking parent task runs), asked of the API once per process."""
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            run_id = flow_run_id
            for _ in range(8):  # subflows nest one or two deep here
                run = client.read_flow_run(run_id)
                if run.parent_task_run_id is None:
                    return str(run.id)
                run_id = str(client.read_task_run(run.parent_task_run_id).flow_run_id)
    except Exception:  # noqa: BLE001 - no API (a test without a server): the task run's own flow run keeps the line
        return None
    return None


def log_to_root(message: str, warning: bool = False) -> None:
    """`message` in the logs of the flow run a user started (the deployment's, which `--watch` follows), from a task or
    an inner flow; in the current run's logs when there is no API to ask (a test without a server)."""
    from prefect.context import FlowRunContext

    ctx = TaskRunContext.get()
    here = str(ctx.task_run.flow_run_id) if ctx is not None else None
    if here is None and (flow_ctx := FlowRunContext.get()) is not None and flow_ctx.flow_run is not None:
        here = str(flow_ctx.flow_run.id)
    root = _root_flow_run(here) if here else None
    log = get_run_logger()
    (log.warning if warning else log.info)(message, extra={"flow_run_id": root} if root else {})


_PROGRESS_LOG = logging.getLogger("vrag_data.progress")
if not any(isinstance(h, _ToTaskLogs) for h in _PROGRESS_LOG.handlers):
    _PROGRESS_LOG.addHandler(_ToTaskLogs())
    _PROGRESS_LOG.setLevel(logging.INFO)
    _PROGRESS_LOG.propagate = False


@contextmanager
def _progress_lines() -> Iterator[None]:
    """A stage in a task reports progress as lines (several tasks run at once), into the task's logs."""
    from vrag_data.progress import lines_only

    with lines_only():
        yield


def reason_first(stage: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A shard that fails logs `failed: <stage>: <reason>` before Prefect logs its traceback, so the first line of
    the failure (in `--watch`, `prefect flow-run logs`, the UI) is the reason, not a stack frame."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as err:
                get_run_logger().error("failed: %s", one_line(err, stage))
                flush_logs()
                raise
        return run
    return wrap


def flush_logs() -> None:
    """Send the queued log lines now: Prefect ships logs in batches but state changes at once, so without this
    `--watch` can show "Failed" before the line that says why."""
    from prefect.logging.handlers import APILogWorker

    try:
        APILogWorker.drain_all(timeout=5)
    except Exception:  # noqa: BLE001 - the reason is also in the state message; never mask the failure itself
        pass


def one_line(err: BaseException, stage: str | None = None) -> str:
    text = " ".join(str(err).split())[:2000] or type(err).__name__
    return text if stage is None or text.startswith(stage) else f"{stage}: {text}"


def worker() -> str:
    """Where a shard ran (host:pid): a Ray cluster spreads them over nodes and worker processes."""
    return f"{socket.gethostname()}:{os.getpid()}"


@task(name="sample-corpus", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("sample corpus")
def sample_corpus(out_dir: str, docs: int, seed: int, key: str) -> dict[str, Any]:
    from vrag_data.sample import make_sample_corpus

    made = make_sample_corpus(Path(out_dir), docs=docs, seed=seed)
    return {"dir": out_dir, "qa": str(made.qa_path), "files": [str(p) for p in made.paths], "questions": made.n_questions}


@task(name="ingest-shard", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("ingest")
def ingest_shard(ws_root: str, files: list[str], cfg: IngestConfig, shard: int, key: str) -> dict[str, Any]:
    from vrag_data.ingest import ingest_paths

    opts = cfg.options()
    with _progress_lines():
        summary = ingest_paths(files, Workspace(ws_root), opts, progress=True)
    if not summary.ok:
        reasons = "; ".join(f"{Path(e.path).name}: {e.reason}" for e in summary.errors[:3])
        raise VragError(f"ingest shard {shard}: no usable document ({reasons})")
    return {"shard": shard, "files": len(files), "docs": summary.n_docs, "pages": summary.n_pages,
            "unchanged": summary.n_skipped_unchanged, "errors": [f"{Path(e.path).name}: {e.reason}" for e in summary.errors],
            "seconds": summary.seconds, "worker": worker()}


@task(name="build-index", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("index")
def build_index(ws_root: str, cfg: IndexConfig, key: str) -> dict[str, Any]:
    from vrag_data.retrieve import build_from_config

    from vrag_data.progress import stage_progress

    with _progress_lines(), stage_progress("index (documents)", None) as step:
        res = build_from_config(Workspace(ws_root), cfg, progress=lambda done, total: step(completed=done, total=total))
    return {"message": res.message, "pages": res.n_pages, "docs": res.n_docs}


@task(name="import-tasks", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("tasks import")
def import_tasks(ws_root: str, file: str, fmt: str, split: str, key: str) -> dict[str, Any]:
    from vrag_data.tasks import import_tasks as run_import

    res = run_import(file, Workspace(ws_root), fmt, split=split)
    return {"file": file, "imported": res.imported, "skipped": res.skipped, "errors": res.errors[:20]}


@task(name="generate-tasks", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("tasks generate")
def generate_tasks(ws_root: str, cfg: RunConfig, writer: str, key: str) -> dict[str, Any]:
    """Questions from the ingested pages, topped up to tasks.generate.n (`vrag_data.qgen.topup`: the generated tasks
    that fit the config count, so a re-run with other roles adds none): `writer` is `model` (roles.question_writer)
    or `oracle` (the offline writer, asked for by tasks.generate.writer: offline). Fewer than
    tasks.generate.min_share x n tasks fail the stage, with the largest rejection causes."""
    from vrag_data.qgen.topup import top_up
    from vrag_data.teacher.roles import resolve_roles

    ws = Workspace(ws_root)
    cfg = cfg.model_copy(update={"roles": resolve_roles(cfg.roles)})  # `same_as` roles become their endpoints here
    gcfg = cfg.tasks.generate
    log = get_run_logger()
    up = top_up(ws, cfg, writer,  # type: ignore[arg-type]  # checked by qgen.plan
                progress=lambda kept, tried: log.info("tasks generate: %d new kept, %d attempts", kept, tried))
    log.info("tasks generate: %d of %d generated tasks were there, %d added", up.had, gcfg.n, up.added)
    s = up.summary
    manifest = ws.generate_manifest
    if s is None:  # the workspace holds the config's questions already: nothing generated; an earlier manifest stays
        out = {"target": gcfg.n, "had": up.had, "kept": 0, "total": up.total}
        if not ws.fs.exists(manifest):
            with ws.fs.open(manifest, "w") as f:
                f.write(json.dumps({**out, "config": gcfg.model_dump(mode="json")}, indent=2))
        return {**out, "manifest": manifest}
    got = up.total
    for note in s.notices:
        log.warning("tasks generate: %s", note)
    causes = ", ".join(f"{k} {v}" for k, v in sorted(s.rejected.items(), key=lambda kv: -kv[1])[:3]) or "none"
    if got < gcfg.min_share * gcfg.n:
        raise VragError(f"tasks generate: {got} of {gcfg.n} questions kept after {s.attempted} attempts (writer {s.writer}, "
                        f"below tasks.generate.min_share {gcfg.min_share:.0%}; largest rejection causes: {causes}; "
                        f"see {s.rejections_file}); raise tasks.generate.max_attempts, widen tasks.generate.kinds/sources "
                        "or use another writer")
    # a requested kind kept under its share (the CLI exits 3 for it): said in the run's log and kept in the manifest
    short = s.tally.short_kinds(gcfg.n, gcfg.min_share)
    if short:
        log.warning("tasks generate: kinds under %.0f%% of their share of n %d: %s; ask only the kinds this corpus gives "
                    "(tasks.generate.kinds), raise tasks.generate.max_attempts or use a model writer",
                    100 * gcfg.min_share, gcfg.n, "; ".join(short))
    out = {**s.model_dump(mode="json"), "target": gcfg.n, "had": up.had, "total": up.total, "short_kinds": short}
    with ws.fs.open(manifest, "w") as f:  # which writer made the tasks, next to them (each task also names it)
        f.write(json.dumps({**out, "offline_writer": writer == "oracle", "config": gcfg.model_dump(mode="json")}, indent=2))
    return {**out, "manifest": manifest}


@task(name="synth-shard", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("synth")
def synth_shard(ws_root: str, cfg: RunConfig, recipe: Recipe, run_id: str, task_ids: list[str], shard: int, key: str) -> dict[str, Any]:
    """Episodes for one shard of tasks, appended to the recipe's run folder (resumable through its ledger)."""
    from vrag_data.synth.run import synth
    from vrag_data.tasks import load_tasks

    ws = Workspace(ws_root)
    wanted = set(task_ids)
    tasks = [t for t in load_tasks(ws) if t.task_id in wanted]
    if len(tasks) != len(wanted):
        raise VragError(f"synth shard {shard} of {recipe.name}: {len(wanted) - len(tasks)} task(s) no longer in {ws.tasks}; re-run the flow")
    with _progress_lines():
        res = synth(ws, cfg, recipe, run_id=run_id, progress=True, tasks=tasks)
    return {"recipe": recipe.name, "run_id": run_id, "shard": shard, "tasks": len(tasks), "stats": res.stats, "worker": worker()}


@task(name="judge-filter-augment", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("filter")
def judge_and_filter(ws_root: str, run_id: str, cfg: RunConfig, recipe: Recipe, key: str) -> dict[str, Any]:
    from vrag_data.curate.postprocess import judge_and_filter as run_filters

    with _progress_lines():
        res = run_filters(Workspace(ws_root), run_id, cfg, recipe, progress=True)
    for line in res.drops:  # why fewer were kept, in the run's log (`--watch`, the UI) and the task's result
        log_to_root(f"filter {run_id}: dropped: {line}")
    return {"run_id": run_id, "message": res.message, "n_trajectories": res.n_trajectories, "n_kept": res.n_kept,
            "n_augmented": res.n_augmented, "judge": res.judge, "dropped": res.drops}


@task(name="export-run", cache_policy=SHARD_CACHE, persist_result=True)
@reason_first("export")
def export_run(ws_root: str, run_id: str, cfg: ExportConfig, key: str) -> dict[str, Any]:
    from vrag_data.export import export_run as run_export

    from vrag_data.export.kept import count_trajectories
    from vrag_data.progress import stage_progress

    from vrag_data.recipe.runs import recipe_of_run

    ws = Workspace(ws_root)
    recipes = [recipe_of_run(ws, run_id)]  # resolved here from the run's manifest; the export gets the object
    with _progress_lines(), stage_progress(f"export {run_id} (trajectories)", count_trajectories(ws.run(run_id))) as step:
        s = run_export(ws, run_id, formats=list(cfg.formats), model_family=cfg.model_family, config=cfg, on_trajectory=step,
                       recipes=recipes)
    return {"run_id": run_id, "out_dir": s.out_dir, "n_trajectories": s.n_trajectories, "n_kept": s.n_kept,
            "counts": s.counts, "skipped": s.skipped, "warnings": s.warnings, "dropped": s.stats.get("dropped") or []}


@task(name="build-report", cache_policy=NO_CACHE)
@reason_first("report")
def build_report(ws_root: str, run: str | None = None) -> dict[str, Any]:
    """Always rebuilt: the report reads the whole workspace and must show its newest state."""
    import duckdb

    from vrag_data.report import build_report as build, summary_rows

    ws = Workspace(ws_root)
    with _progress_lines():
        res = build(ws, run, progress=True)
    rows: list[dict[str, Any]] = []
    if ws.is_local:
        con = duckdb.connect(res.db_path.removeprefix("file://"), read_only=True)
        try:
            rows = summary_rows(con)
        finally:
            con.close()
    return {"db": res.db_path, "html": res.html_path, "runs": res.runs, "counts": res.counts, "summary": rows}


@task(name="train", cache_policy=NO_CACHE)
def train(config: str, mode: str, data: str | None, workspace: str | None, output: str | None, max_steps: int | None) -> dict[str, Any]:
    from vrag_data.train.config import load_train_config

    cfg = load_train_config(config)
    if data is not None:
        cfg.data = cfg.data.model_copy(update={"path": data})
    upd: dict[str, Any] = {}
    if workspace is not None:
        upd["workspace"] = workspace
    if output is not None:
        upd["output_dir"] = output
    cfg = cfg.model_copy(update=upd)
    if mode == "sft":
        from vrag_data.train.sft import describe, run_sft

        if max_steps is not None:
            cfg.sft = cfg.sft.model_copy(update={"max_steps": max_steps})
        return describe(run_sft(cfg))
    if mode == "rl":
        from vrag_data.recipe.runs import recipe_to_train
        from vrag_data.train.rl import run_rl

        if max_steps is not None:
            cfg.rl = cfg.rl.model_copy(update={"max_steps": max_steps})
        res = run_rl(cfg, recipe_to_train(cfg.rl.recipe))
        return {"output_dir": str(res.output_dir), "global_step": res.global_step,
                "last": res.logs[-1].__dict__ if res.logs else {}}
    raise VragError(f"train mode {mode!r}: use sft or rl")
