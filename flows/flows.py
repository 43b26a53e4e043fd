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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows import stages
from flows.artifacts import publish
from flows.run_hints import log_cancel_hint
from flows.runner import describe_runner, make_task_runner, resolve_runner
from flows.secret_keys import use_secret_blocks
from flows.tasks import flush_logs, one_line
from vrag_data.config import RoleParameter, RunConfig, load_config, parse_config
from vrag_data.export.formats import all_formats
from vrag_data.export.interrupted import restore_interrupted_exports
from vrag_data.config_check import check_run_config, set_origins, with_origins
from vrag_data.errors import ConfigError, VragError
from vrag_data.recipe import resolve_recipe
from vrag_data.store.run import RunDir
from vrag_data.store.tempfiles import sweep_temp_files, write_text_atomic
from vrag_data.store.workspace import Workspace

SUMMARY_FILE = "pipeline.json"
# Prefect's CLI finds a deployment by `<flow>/<deployment>` (`prefect deployment run NAME` rejects a bare name), so
# the entry flows share the project's name and each deployment is named after its flow: `vrag-data/synth`, ...
FLOW = "vrag-data"


@contextmanager
def _reason_logged() -> Iterator[None]:
    """A failing flow says why in one line in its run logs before Prefect's own traceback and its Failed state
    (`prefect deployment run --watch` and `prefect flow-run logs` show one flow run's logs: each flow says it)."""
    log_cancel_hint()  # first line of a top-level run: how to stop it (Ctrl-C on --watch stops only the watcher)
    try:
        yield
    except Exception as err:
        get_run_logger().error("failed: %s", one_line(err))
        flush_logs()
        raise


class ShardsFailed(VragError):
    """Some shards failed after their retries (the others finished and were kept)."""


def load(config: str | None, workspace: str | None = None, runner: str | None = None,
         overrides: dict[str, Any] | None = None, endpoints: bool = False,
         sets: list[str] | None = None, origins: dict[str, str] | None = None) -> tuple[RunConfig, Workspace]:
    """The config with the flow's parameters applied, checked completely (recipes, roles, endpoint URLs, every
    stage's inputs), then every endpoint asked for its models: all before any work. `origins`: the config keys the
    parameters set and which parameter set each; a problem with one of them says so (not only the config file)."""
    origins = {**(origins or {}), **set_origins(sets or (), "--param sets"), **({"workspace": "--param workspace"} if workspace else {})}
    try:
        return _load(config, workspace, runner, overrides, endpoints, sets)
    except (VragError, ConfigError) as err:
        err.args = (with_origins(str(err), origins), *err.args[1:])
        raise


def _load(config: str | None, workspace: str | None, runner: str | None, overrides: dict[str, Any] | None,
          endpoints: bool, sets: list[str] | None) -> tuple[RunConfig, Workspace]:
    use_secret_blocks()  # api keys: this process's environment, then Prefect Secret blocks (`flows.secret_keys`)
    cfg = load_config(config, sets or ())  # `--set key=value` items, as on every command that takes a config
    over = dict(overrides or {})
    if workspace:
        over["workspace"] = workspace
    if over:
        cfg = parse_config(_merge(cfg.model_dump(mode="json", exclude_unset=True), over), f"{config or '<defaults>'} + parameters")
    check_run_config(cfg, config or "<defaults>")  # recipes, roles, endpoints, inputs of every stage: before any work
    root = cfg.workspace if "://" in cfg.workspace else str(Path(cfg.workspace).expanduser().resolve())
    cfg = cfg.model_copy(update={"workspace": root, "runner": resolve_runner(cfg.runner, runner)})
    if endpoints:
        check_endpoints(cfg)
    ws = Workspace(root).makedirs()
    if ws.is_local:  # what a stage killed outright left: its temp files, an export set aside for one it was writing
        sweep_temp_files(ws.root)
        for line in restore_interrupted_exports(ws):
            get_run_logger().warning("%s", line)
    return cfg, ws


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def check_endpoints(cfg: RunConfig) -> None:
    """GET /models on every endpoint of every configured role, before ingest: an endpoint that is down or serves
    another model fails the run now, not after minutes of ingest."""
    import asyncio
    import tempfile

    from vrag_data.teacher import RequestCache, TeacherPool
    from vrag_data.teacher.roles import resolve_roles

    roles = {r: rc for r, rc in resolve_roles(cfg.roles).items() if rc.kind == "openai"}
    if not roles:
        return

    async def check(tmp: str) -> None:
        pool = TeacherPool(roles, RequestCache(tmp), "endpoint-check")
        try:
            await pool.check()
        finally:
            await pool.close()

    with tempfile.TemporaryDirectory(prefix="vrag-endpoint-check-") as tmp:
        asyncio.run(check(tmp))


def _where() -> str:
    """What a relative path given to a flow resolves against: the flow run's folder, which for a deployment run
    is the folder the deployments are served from (`vrag-data up`'s), not the caller's."""
    from prefect.runtime import deployment

    here = Path.cwd()
    if deployment.id:
        return f"{here}, the folder the deployments are served from (where `vrag-data up` was started)"
    return f"{here} (the current folder)"


def resolve_path(path: str | None, what: str, must_exist: bool = True) -> str | None:
    """An absolute path for a path parameter; a relative one that does not exist fails naming the folder it was
    resolved against (the caller of `prefect deployment run` may sit in another folder than the flow run)."""
    if path is None or "://" in path:
        return path
    raw = Path(path).expanduser()
    full = raw.resolve()
    if must_exist and not full.exists():
        where = f"; a relative path resolves against {_where()}" if not raw.is_absolute() else ""
        raise VragError(f"{what} {path}: not found{where}; pass an absolute path")
    if not raw.is_absolute():
        get_run_logger().info("%s %s resolved against %s: %s", what, path, _where(), full)
    return str(full)


def _summary(ctx: stages.Ctx, config: str | None, **extra: Any) -> dict[str, Any]:
    shards = [{**asdict(s), "failed": s.failed} for s in ctx.states]
    return {"workspace": ctx.ws.root, "config": config and str(Path(config).resolve()), "runner": describe_runner(ctx.cfg.runner),
            "shards": shards, "notes": _notes(ctx), **extra}


def _notes(ctx: stages.Ctx) -> list[str]:
    """What the summary says besides its tables: the input files ingest skipped (each with its reason), and why a
    filter or an export kept fewer than it was given (the filter that dropped most, its reasons counted, the config
    keys that change it)."""
    notes = []
    for s in ctx.states:
        r = s.result or {}
        if s.stage == "ingest":  # an input file the batch went on without: named, with its reason
            notes += [f"ingest: skipped {err}" for err in r.get("errors") or []]
        if s.stage in ("filter", "export") and r.get("dropped") and r.get("n_kept", 0) < r.get("n_trajectories", 0):
            notes.append(f"{s.stage} {s.label}: kept {r['n_kept']} of {r['n_trajectories']}; dropped: {r['dropped'][0]}")
    return notes


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
        write_text_atomic(path, json.dumps({k: v for k, v in summary.items() if k != "markdown"}, indent=2, default=str))
    failed = [s for s in summary["shards"] if s["failed"]]
    log = get_run_logger()  # the outcome in this flow run's own logs (`prefect flow-run logs`), not only its subflow's
    log.info("%s: %d shard(s) done, %d failed", key.removesuffix("-summary"), len(summary["shards"]) - len(failed), len(failed))
    for recipe, e in summary.get("exports", {}).items():
        log.info("export %s (run %s): %s", recipe, e["run_id"], e["dir"])
    if failed:
        # each shard's reason whole (bounded on its own by `stages.bounded`), so no fix is cut off
        more = f" | and {len(failed) - 3} more (see pipeline.json)" if len(failed) > 3 else ""
        raise ShardsFailed(f"{len(failed)} shard(s) failed after retries (others kept): "
                           + " | ".join(f"{s['stage']} {s['label']}: {s['message']}" for s in failed[:3]) + more)
    return summary


@flow(name="synth-shards")
def synth_shards(cfg: RunConfig) -> dict[str, Any]:
    # the flow is the entry point: it resolves each recipe once and the stages pass the objects to their tasks
    recipes = [resolve_recipe(n, cfg) for n in cfg.synth.recipes]  # names, or `module:ATTR` references
    ctx = stages.Ctx(Workspace(cfg.workspace), cfg, recipes={r.name: r for r in recipes})
    with _reason_logged():  # the stage's reason is the first line of the failure, before Prefect's traceback
        paths, qa = stages.sources(ctx)
        stages.ingest(ctx, paths)
        stages.index(ctx)
        found = stages.tasks(ctx, qa)
        runs = stages.synth(ctx, found)
        out_dirs = stages.postprocess(ctx, runs)
        report = stages.report(ctx)
    gen = next((s.result for s in ctx.states if s.stage == "tasks" and s.label.startswith("generate") and s.result), None)
    generated = gen and {k: gen.get(k) for k in ("writer", "kept", "already", "attempted", "stored", "manifest")}
    return _summary(ctx, None, tasks=len(found), generated=generated, runs=runs, exports=_exports(runs, out_dirs),
                    report=report)


def _run_name(kind: str) -> Callable[[], str]:
    def name() -> str:
        from prefect.utilities.names import generate_slug

        return f"{kind}-{generate_slug(2)}"  # the flows share one name: the run's name says which it is
    return name


def _origins(input: str | None, recipe: str | list[str] | None, endpoints: dict[str, RoleParameter] | None,
             samples: int | None, questions: int | None) -> dict[str, str]:
    """The config keys the synth flow's parameters set, each with the parameter that set it."""
    given = {"ingest.paths": ("input", input), "synth.recipes": ("recipe", recipe), "synth.samples": ("samples", samples),
             "tasks.generate.n": ("questions", questions)}
    out = {key: f"--param {name}" for key, (name, value) in given.items() if value is not None}
    return {**out, **{f"roles.{role}": f"--param endpoints.{role}" for role in endpoints or {}}}


def _overrides(input: str | None, recipe: str | list[str] | None, endpoints: dict[str, RoleParameter] | None,
               samples: int | None, questions: int | None) -> dict[str, Any]:
    over: dict[str, Any] = {}
    if input is not None:
        # the user's documents are the corpus: the config's sample corpus (and its QA file) step aside
        over["ingest"] = {"paths": [resolve_path(input, "input")], "sample_corpus": None}
    if recipe is not None:
        over["synth"] = {"recipes": [recipe] if isinstance(recipe, str) else list(recipe)}
    if samples is not None:
        over.setdefault("synth", {})["samples"] = samples
    if questions is not None:
        over["tasks"] = {"generate": {"n": questions}}
    if endpoints:
        # a role given here is that endpoint (kind openai), whatever the config said, with the role settings it gives
        # (vision, timeout_s, sampling, ...); the config's other settings of the role stay
        over["roles"] = {role: RoleParameter.model_validate(ep.model_dump(exclude_unset=True)).as_role()
                         for role, ep in endpoints.items()}
    return over


@flow(name=FLOW, flow_run_name=_run_name("synth"), log_prints=True)
def synth(config: str | None = None, input: str | None = None, recipe: str | list[str] | None = None,
          workspace: str | None = None, endpoints: dict[str, RoleParameter] | None = None, samples: int | None = None,
          questions: int | None = None, runner: str | None = None, sets: list[str] | None = None) -> dict[str, Any]:
    """The whole pipeline, PDFs to data: ingest -> index -> tasks (import a QA file, or generate questions with
    roles.question_writer) -> episodes per recipe and task shard -> judge, filters, augmentations -> exports -> report.

    Args:
        config: Run config (YAML). A relative path resolves against the folder the deployments are served from (where `vrag-data up` was started). Default: the built-in defaults (then give recipe, input and endpoints).
        input: A folder (or one file) of PDFs or page images to build the data from; replaces the config's ingest.paths and sample corpus.
        recipe: The recipe to run (e.g. visor), or a list of recipes; replaces synth.recipes.
        workspace: Folder for every product (pages, index, tasks, runs, exports, report); replaces the config's workspace.
        endpoints: OpenAI-compatible endpoints by role, e.g. {"policy": {"base_url": "http://127.0.0.1:8000/v1", "model": "teacher"}, "question_writer": {...}, "judge": {...}}; each replaces that role of the config. A role may also give any setting of roles.<role>: vision (true for a vision model the name check does not know), timeout_s, max_retries, backoff_s, backoff_max_s, sampling.
        samples: Episodes per task and recipe (synth.samples).
        questions: Questions to generate from the documents (tasks.generate.n).
        runner: Where the shard tasks run: local (threads) or ray (default: the config's runner.kind).
        sets: Config overrides as "key.sub=value" items (what `--set` does on the command line), e.g. ["synth.samples=4"].
    """
    with _reason_logged():
        config = resolve_path(config, "config")
        over = _overrides(input, recipe, endpoints, samples, questions)
        cfg, ws = load(config, resolve_path(workspace, "workspace", must_exist=False), runner, over, endpoints=True,
                       sets=sets, origins=_origins(input, recipe, endpoints, samples, questions))
        inner = synth_shards.with_options(task_runner=make_task_runner(cfg.runner))
        summary = inner(cfg)
        summary["config"] = config
        return _finish("synth-summary", f"synth: {Path(config).name if config else ws.root}", ws, summary)


@flow(name="ingest-shards")
def ingest_shards(cfg: RunConfig) -> dict[str, Any]:
    ctx = stages.Ctx(Workspace(cfg.workspace), cfg)
    with _reason_logged():
        paths, qa = stages.sources(ctx)
        stages.ingest(ctx, paths)
        stages.index(ctx)
        n = len(stages.tasks(ctx, qa)) if qa else 0
    return _summary(ctx, None, tasks=n, report=stages.report(ctx))


@flow(name=FLOW, flow_run_name=_run_name("ingest"), log_prints=True)
def ingest(config: str, workspace: str | None = None, runner: str | None = None) -> dict[str, Any]:
    """Documents -> pages, layout, OCR (one task per shard of documents), then the search index (and the QA file's tasks)."""
    with _reason_logged():
        config = resolve_path(config, "config")
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


@flow(name=FLOW, flow_run_name=_run_name("export"), log_prints=True)
def export(config: str, workspace: str | None = None, runs: list[str] | None = None, runner: str | None = None) -> dict[str, Any]:
    """Exports (HF datasets, LLaMA-Factory, verl, EasyR1) of the given runs (default: every run of the workspace)."""
    with _reason_logged():
        config = resolve_path(config, "config")
        cfg, ws = load(config, workspace, runner)
        if not runs:
            root = Path(ws.runs)
            runs = sorted(p.name for p in root.iterdir() if RunDir(str(p)).has_manifest()) if root.is_dir() else []
        if not runs:
            raise VragError(f"{ws.runs}: no runs to export; run the synth flow first")
        summary = export_shards.with_options(task_runner=make_task_runner(cfg.runner))(cfg, runs)
        summary["config"] = str(Path(config).resolve())
        return _finish("export-summary", f"export: {Path(config).name}", ws, summary)


@flow(name=FLOW, flow_run_name=_run_name("report"), log_prints=True)
def report(config: str | None = None, workspace: str | None = None) -> dict[str, Any]:
    """report.duckdb + report.html of the workspace, and its summary table as an artifact."""
    with _reason_logged():
        config = resolve_path(config, "config")
        cfg, ws = load(config, workspace)
        ctx = stages.Ctx(ws, cfg)
        summary = _summary(ctx, config, report=stages.report(ctx))
        return _finish("report-summary", f"report: {ws.root}", ws, summary)


@flow(name=FLOW, flow_run_name=_run_name("train"), log_prints=True)
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
