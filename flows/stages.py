"""The pipeline's stages as shard submissions, called inside a flow (flows.flows).

Each stage plans its shards from the workspace, binds the run-time options (retries with exponential
backoff, result storage under the workspace, and `refresh_cache` when a shard's outputs are gone so a
cached result never hides deleted data) and submits them under the concurrency limit. Every shard's final
state is recorded in `Ctx.states`; a failed shard (after its retries) is reported, the others go on.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect.states import State
from prefect.tasks import Task, exponential_backoff

from flows import tasks as T
from flows.keys import files_digest, stage_key, tree_fingerprint
from flows.scheduling import run_bounded, run_lanes
from vrag_data.config import RunConfig
from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.ingest.backends import ingest_hash
from vrag_data.recipe.base import Recipe
from vrag_data.schema.records import Task as VTask
from vrag_data.store.corpus import shard_path as corpus_shard
from vrag_data.store.run import EPISODE_GLOB, RunDir
from vrag_data.store.run_stats import merge_shard_stats
from vrag_data.store.workspace import Workspace


@dataclass
class ShardState:
    stage: str
    label: str
    state: str  # Completed, Cached, Failed, Crashed, ...
    message: str = ""
    result: Any = None

    @property
    def failed(self) -> bool:
        return self.state not in ("Completed", "Cached")


@dataclass
class Ctx:
    ws: Workspace
    cfg: RunConfig
    recipes: dict[str, Recipe] = field(default_factory=dict)  # name -> configured recipe, resolved by the flow
    states: list[ShardState] = field(default_factory=list)
    _storage: Any = None

    @property
    def storage(self) -> Any:
        if self._storage is None:
            self._storage = result_storage(self.ws)
        return self._storage

    def record(self, stage: str, label: str, state: State | None) -> ShardState | None:
        if state is None:
            return None
        result = state.result(raise_on_failure=False) if state.is_completed() else None
        message = "" if state.is_completed() else _reason(state)
        s = ShardState(stage, label, state.name, message, result)
        self.states.append(s)
        return s


MAX_REASON = 1200  # one shard's reason in a summary line; a longer one loses its middle, never its fix


def _reason(state: State) -> str:
    """A failed shard's reason without Prefect's wrapping ("Task run encountered an exception VragError: ...")."""
    text = " ".join(str(state.message or state.name).split())
    text = re.sub(r"^Task run encountered an exception:? ", "", text)
    return bounded(re.sub(r"^[A-Z]\w*(Error|Refused|Failed|Exception): ", "", text))


def bounded(text: str, limit: int = MAX_REASON) -> str:
    """`text` within `limit` characters, cut in its cause, never in its fix: the last `; ` clause (where a reason says
    what to do) is kept whole, and the cause before it loses its end, marked with `...`."""
    if len(text) <= limit:
        return text
    cause, sep, fix = text.rpartition("; ")
    if not sep or len(fix) > limit // 2:
        return text[:limit - 3] + "..."
    return f"{cause[:limit - len(fix) - 5]}...; {fix}"


def result_storage(ws: Workspace) -> Any:
    """Shard results and cache records live in the workspace, so they go when the workspace goes."""
    if ws.is_local:
        return Path(ws.orchestrator_results.removeprefix("file://"))
    from prefect.filesystems import RemoteFileSystem

    block = RemoteFileSystem(basepath=ws.orchestrator_results)
    block.save(f"vrag-results-{short_hash(ws.root, n=10)}", overwrite=True)  # Ray workers load it by id
    return block


def bind(ctx: Ctx, task: Task[..., Any], refresh: bool = False) -> Task[..., Any]:
    rc = ctx.cfg.runner
    return task.with_options(
        retries=rc.retries,
        retry_delay_seconds=exponential_backoff(rc.retry_delay_s) if rc.retries else 0,
        retry_jitter_factor=0.5 if rc.retry_delay_s else None,
        result_storage=ctx.storage,
        refresh_cache=refresh,
    )


def submitter(ctx: Ctx, stage: str, label: str, task: Task[..., Any], outputs: list[str] | Callable[[], bool],
              *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """A deferred submission. `outputs`: the paths the shard writes, or a callable saying whether they are
    complete; checked at submission time (after the shards before it in its lane)."""
    def submit() -> Any:
        complete = outputs() if callable(outputs) else _exists(ctx.ws, *outputs)
        return bind(ctx, task, refresh=not complete).submit(*args, **kwargs)
    submit.stage, submit.label = stage, label  # type: ignore[attr-defined]
    return submit


def run_one(ctx: Ctx, sub: Callable[[], Any]) -> ShardState:
    state = run_bounded([sub], 1)[0]
    return ctx.record(sub.stage, sub.label, state)  # type: ignore[attr-defined, return-value]


def run_all(ctx: Ctx, lanes: list[list[Callable[[], Any]]]) -> None:
    def done(i: int, j: int, state: State | None) -> None:
        sub = lanes[i][j]
        ctx.record(sub.stage, sub.label, state)  # type: ignore[attr-defined]

    run_lanes(lanes, ctx.cfg.runner.max_concurrency, on_done=done)


def _exists(ws: Workspace, *paths: str) -> bool:
    return all(ws.fs.exists(p) for p in paths)


def _abs(path: str) -> str:
    return path if "://" in path else str(Path(path).expanduser().resolve())


def _stem(path: str) -> str:
    return Path(path.rsplit("/", 1)[-1]).stem


def sources(ctx: Ctx) -> tuple[list[str], str | None]:
    """Input paths and the QA file; a configured sample corpus is generated into `<workspace>/sources/`."""
    paths = [_abs(p) for p in ctx.cfg.ingest.paths]
    qa = _abs(ctx.cfg.tasks.file) if ctx.cfg.tasks.file else None
    n = ctx.cfg.ingest.sample_corpus
    if n:
        if not ctx.ws.is_local:
            raise VragError(f"{ctx.ws.root}: ingest.sample_corpus writes local files; run `vrag-data sample-corpus OUT` "
                            "and list OUT under ingest.paths instead")
        seed = ctx.cfg.ingest.sample_seed
        out = ctx.ws.source(f"sample-{n}docs-seed{seed}")
        s = run_one(ctx, submitter(ctx, "sample", out, T.sample_corpus, [f"{out}/qa.jsonl", f"{out}/MANIFEST.json"],
                                   out, n, seed, key=stage_key("sample", [n, seed], [])))
        if s.failed:
            raise VragError(f"sample corpus: {s.message}")
        paths.append(s.result["dir"])
        qa = qa or s.result["qa"]
    return paths, qa  # no paths: the flow works on what the workspace already holds


def doc_shards(files: list[str], per_shard: int) -> list[list[str]]:
    """Shards of at most `per_shard` documents; files with the same stem share a shard, so the ingest
    stage's own check catches the clash of page ids instead of two shards overwriting each other."""
    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(_stem(f), []).append(f)
    shards: list[list[str]] = [[]]
    for stem in sorted(groups):
        if shards[-1] and len(shards[-1]) + len(groups[stem]) > max(1, per_shard):
            shards.append([])
        shards[-1].extend(groups[stem])
    return [s for s in shards if s]


def ingest(ctx: Ctx, paths: list[str]) -> None:
    from vrag_data.ingest import discover_inputs

    c = ctx.cfg.ingest
    if not paths:
        if not ctx.ws.fs.exists(ctx.ws.corpus_table("pages")):
            raise VragError(f"{ctx.ws.root}: nothing ingested and nothing to ingest; set ingest.paths (PDFs, images or "
                            "folders) or ingest.sample_corpus in the config")
        return
    files = discover_inputs(paths)
    opts_hash = ingest_hash(c.options())
    lanes = []
    for i, shard in enumerate(doc_shards(files, c.docs_per_shard)):
        outputs = [corpus_shard(ctx.ws, "documents", _stem(f)) for f in shard]
        key = stage_key("ingest", files_digest(shard), opts_hash)
        label = f"shard {i}: {len(shard)} document(s) {_stem(shard[0])}..{_stem(shard[-1])}"
        lanes.append([submitter(ctx, "ingest", label, T.ingest_shard, outputs, ctx.ws.root, shard, c, i, key=key)])
    run_all(ctx, lanes)
    _ingest_outcome(ctx)


def _ingest_outcome(ctx: Ctx) -> None:
    """Files the shards could not use are named in the run's logs (the batch went on without them); when no shard
    ingested anything, the stage fails with their reasons, before the index says there are no pages."""
    from flows.tasks import log_to_root

    mine = [s for s in ctx.states if s.stage == "ingest"]
    for s in mine:
        for err in (s.result or {}).get("errors") or []:
            log_to_root(f"ingest: skipped {err}", warning=True)  # in the run `--watch` follows, not only the inner flow's
    failed = [s for s in mine if s.failed]
    if mine and len(failed) == len(mine):
        raise VragError("ingest: nothing could be ingested: " + " | ".join(s.message for s in failed[:3])
                        + (f" | and {len(failed) - 3} more shard(s)" if len(failed) > 3 else ""))


def index(ctx: Ctx) -> None:
    c = ctx.cfg.index
    key = stage_key("index", tree_fingerprint(ctx.ws.corpus_table("pages")), c.model_dump(mode="json"))
    s = run_one(ctx, submitter(ctx, "index", c.retriever, T.build_index, [ctx.ws.index_manifest(c.retriever)],
                               ctx.ws.root, c, key=key))
    if s.failed:
        raise VragError(f"index: {s.message}")


def tasks(ctx: Ctx, qa: str | None) -> list[VTask]:
    """The tasks stage: import the QA file (the config's or the sample corpus's), then generate questions from the
    ingested pages when the config has a writer (`vrag_data.qgen.plan`), then every task of the workspace."""
    from vrag_data.qgen.plan import planned_writer
    from vrag_data.tasks import import_shard_path, load_tasks

    if qa is not None:
        fmt, split = ctx.cfg.tasks.format, ctx.cfg.tasks.split
        key = stage_key("tasks", [files_digest([qa]), tree_fingerprint(ctx.ws.corpus_table("documents"))], [fmt, split])
        shard = import_shard_path(ctx.ws, qa)  # one shard per imported file, named from where the file is
        s = run_one(ctx, submitter(ctx, "tasks", Path(qa).name, T.import_tasks, [shard], ctx.ws.root, qa, fmt, split,
                                   key=key))
        if s.failed:
            raise VragError(f"tasks import: {s.message}")
    writer = planned_writer(ctx.cfg)
    if writer is not None:
        from vrag_data.qgen.generate import SHARD
        from vrag_data.teacher.roles import resolve_roles

        roles = resolve_roles(ctx.cfg.roles)
        used = {r: roles[r].model_dump(mode="json") for r in ("question_writer", "judge", "student") if r in roles}
        key = stage_key("generate", [tree_fingerprint(ctx.ws.corpus_table("pages"))],
                        [ctx.cfg.tasks.generate.model_dump(mode="json"), writer, used])
        manifest = ctx.ws.generate_manifest
        s = run_one(ctx, submitter(ctx, "tasks", f"generate ({writer} writer)", T.generate_tasks,
                                   [ctx.ws.task_shard(SHARD), manifest], ctx.ws.root, ctx.cfg, writer, key=key))
        if s.failed:
            raise VragError(s.message if s.message.startswith("tasks generate") else f"tasks generate: {s.message}")
    limit = ctx.cfg.synth.limit if ctx.cfg.synth.limit is not None else ctx.cfg.tasks.limit
    found = load_tasks(ctx.ws, limit)
    if not found:
        raise VragError(f"tasks: {ctx.ws.tasks} holds no tasks; set tasks.file (a QA file), roles.question_writer or "
                        "tasks.generate.writer: offline (questions generated from the pages, tasks.generate), or run "
                        "`vrag-data tasks generate` first")
    return found


def _synth_done(run_dir: str, task_ids: list[str], samples: int) -> bool:
    from vrag_data.synth.ledger import done_keys

    done = done_keys(run_dir) if os.path.isdir(run_dir) else set()
    return all((t, s) in done for t in task_ids for s in range(samples))


def synth(ctx: Ctx, found: list[VTask]) -> dict[str, str]:
    """Episodes per recipe and task shard; the shards of one recipe run one after the other (one run folder,
    one writer), recipes side by side. Returns recipe -> run id."""
    from vrag_data.synth.run import default_run_id

    c = ctx.cfg.synth
    per = max(1, c.tasks_per_shard)
    shards = [found[i:i + per] for i in range(0, len(found), per)]
    runs: dict[str, str] = {}
    lanes = []
    for recipe, rec in ctx.recipes.items():  # the object travels to the shard tasks (threads or Ray workers): no lookup there
        run_id = runs[recipe] = default_run_id(rec, ctx.cfg)
        run_dir = ctx.ws.run(run_id)
        lane = []
        for i, shard in enumerate(shards):
            ids = [t.task_id for t in shard]
            # the run id already hashes what shapes an episode (recipe, options, roles, max turns, seed); the rest
            # of the synth section (other recipes, shard size, concurrency) must not invalidate this shard
            key = stage_key("synth", [run_id, short_hash([t.model_dump(mode="json") for t in shard]), c.samples], [])
            done = functools.partial(_synth_done, run_dir, ids, c.samples)  # every (task, sample) in the ledger
            lane.append(submitter(ctx, "synth", f"{recipe} shard {i}: {len(ids)} task(s)", T.synth_shard, done,
                                  ctx.ws.root, ctx.cfg, rec, run_id, ids, i, key=key))
        lanes.append(lane)
    run_all(ctx, lanes)
    for recipe, run_id in runs.items():
        _close_manifest(ctx, recipe, run_id, len(found))
    return runs


def _close_manifest(ctx: Ctx, recipe: str, run_id: str, n_tasks: int) -> None:
    """Each shard rewrites the run manifest with its own counts; the run's manifest should describe the run."""
    run = RunDir(ctx.ws.run(run_id))
    manifest = run.manifest()
    if manifest is None:
        return
    mine = [s for s in ctx.states if s.stage == "synth" and s.label.startswith(f"{recipe} shard ")]
    if all(s.state == "Cached" for s in mine):
        return  # nothing ran: the manifest already describes the run
    totals = merge_shard_stats((s.result or {}).get("stats") or {} for s in mine)
    failed = any(s.failed for s in mine)
    run.write_manifest(manifest.model_copy(update={"n_tasks": n_tasks, "stats": totals or manifest.stats,
                                                   "status": "failed" if failed else "finished"}))


def postprocess(ctx: Ctx, runs: dict[str, str]) -> dict[str, str]:
    """Judge + filters + augmentations, then exports, per run (one lane each). Returns run id -> export dir
    for the runs that were exported."""
    ws, cfg = ctx.ws, ctx.cfg
    out_dirs: dict[str, str] = {}
    lanes = []
    for recipe, run_id in runs.items():
        run = RunDir(ws.run(run_id))
        if not run.has_manifest():
            continue  # every shard of this recipe failed: nothing to filter
        roles = {k: v.model_dump(mode="json") for k, v in sorted(cfg.roles.items())}
        fkey = stage_key("filter", tree_fingerprint(run.trajectories_dir, pattern=EPISODE_GLOB),
                         [cfg.filters.model_dump(mode="json"), roles])
        filt = submitter(ctx, "filter", recipe, T.judge_and_filter, [run.verdicts_path], ws.root, run_id, cfg,
                         ctx.recipes[recipe], key=fkey)
        out = ws.export_dir(run_id)

        def export(run_id: str = run_id, run: RunDir = run, out: str = out, recipe: str = recipe) -> Any:
            ok = [s for s in ctx.states if s.stage == "filter" and s.label == recipe and not s.failed]
            if not ok:
                return None  # unfiltered trajectories are not exported
            ekey = stage_key("export", [tree_fingerprint(run.trajectories_dir, run.verdicts_dir),
                                        tree_fingerprint(ws.tasks)], cfg.export.model_dump(mode="json"))
            out_dirs[run_id] = out
            return submitter(ctx, "export", recipe, T.export_run, [ws.export_summary(run_id)], ws.root, run_id, cfg.export, key=ekey)()

        export.stage, export.label = "export", recipe  # type: ignore[attr-defined]
        lanes.append([filt, export])
    run_all(ctx, lanes)
    return {r: d for r, d in out_dirs.items() if any(s.stage == "export" and s.result and s.result.get("run_id") == r for s in ctx.states)}


def report(ctx: Ctx) -> dict[str, Any]:
    s = run_one(ctx, submitter(ctx, "report", "report", T.build_report, [], ctx.ws.root))
    return s.result if not s.failed else {"error": s.message}


def export_runs(ctx: Ctx, run_ids: list[str]) -> dict[str, str]:
    """Exports only (the runs' verdicts as they are), one task per run. Returns run id -> export dir."""
    ws, cfg = ctx.ws, ctx.cfg
    subs = []
    for run_id in run_ids:
        run = RunDir(ws.run(run_id))
        if not run.exists():
            raise VragError(f"{run.path}: run not found; list runs under {ws.runs}")
        key = stage_key("export", [tree_fingerprint(run.trajectories_dir, run.verdicts_dir), tree_fingerprint(ws.tasks)],
                        cfg.export.model_dump(mode="json"))
        subs.append(submitter(ctx, "export", run_id, T.export_run, [ws.export_summary(run_id)], ws.root, run_id, cfg.export, key=key))
    run_all(ctx, [[s] for s in subs])
    return {s.label: ws.export_dir(s.label) for s in ctx.states if s.stage == "export" and not s.failed}
