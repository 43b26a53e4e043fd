"""`synth(...)`: one recipe over the workspace's tasks -> `runs/<run_id>/trajectories/*.parquet` + manifest.

Everything that can fail for a configuration reason fails before any episode runs, with one line: an
unknown recipe or recipe option, no policy role, a missing API-key variable, an unreachable endpoint or a
model the endpoint does not serve, a workspace without tasks or pages, a role the recipe uses (its `roles`: the
judge included, which `vrag-data filter` needs) or that a filter of its SFT or RL chain needs (the difficulty filters'
student, unless their `missing` option waives it) that the config leaves out: every such role named in one line,
before any request is paid for. The search index is a step of its own before the episodes (`ensure_index`: built
when the workspace has none). Nothing is filled in: a role plays another only when the config says `same_as: <role>`, and the run
manifest records it (`roles` as configured, `role_substitutions`, `roles_played`). Re-running with the same run id resumes: finished
(task, sample) pairs are skipped and finished teacher calls replay from the run's request cache.

The recipe is a `Recipe` object resolved and configured by the caller (an entry point: the CLI, a flow, a
test); this stage never looks a recipe up by name, so a recipe defined in code runs here as it does through the
flows and on Ray workers. The default run id is derived from everything that changes what synthesis produces: the
recipe's full description (prompts, grammar, environment, options, roles), the configured models and
endpoints and the seed. Edit any of them and the next `synth` starts a new run; to add episodes to an existing
run on purpose (more tasks, more samples, after a crash), pass its id with `--run`.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.config import RoleConfig, RunConfig, check_bound, dump_resolved
from vrag_data.errors import ConfigError, VragError
from vrag_data.ids import short_hash
from vrag_data.retrieve.base import Searcher
from vrag_data.retrieve.build import ensure_index, index_kind, load_index
from vrag_data.schema.records import LayoutBlock, Provenance, RunManifest, Task
from vrag_data.store.run import Compaction, RunDir
from vrag_data.store.corpus import load_documents, load_layout, page_index
from vrag_data.store.workspace import Workspace
from vrag_data.synth.annotate import labelled_loader
from vrag_data.synth.episode import EpisodeDeps, Responder, make_episode
from vrag_data.synth.oracle import OraclePolicy
from vrag_data.synth.runner import run_episodes
from vrag_data.tasks.store import load_tasks
from vrag_data.teacher.cache import RequestCache
from vrag_data.teacher.messages import workspace_image_loader
from vrag_data.teacher.pool import TeacherPool
from vrag_data.teacher.roles import check_roles, describe_roles, roles_for, substitutions
from vrag_data.recipe.base import Recipe
from vrag_data.version import code_version


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    run_dir: str
    recipe: str
    policy: str
    n_tasks: int
    samples: int
    stats: dict[str, Any] = Field(default_factory=dict)
    index_built: bool = False

    @property
    def message(self) -> str:
        s = self.stats
        return (f"run {self.run_id} ({self.recipe}, policy {self.policy}): {s.get('finished', 0)} episode(s) rolled out, "
                f"{s.get('skipped', 0)} already done; answered {s.get('answered', 0)}, errors {s.get('errors', 0)}, "
                f"invalid actions {s.get('invalid', 0)}, requests {s.get('requests', 0)} ({s.get('cache_hits', 0)} cached) "
                f"-> {RunDir(self.run_dir).trajectories_dir}"
                + (f"; warning: {s['redacted_replies']} teacher reply(ies) echoed a configured API key, stored with "
                   "<redacted> in its place" if s.get("redacted_replies") else ""))


def resolved_roles(cfg: RunConfig, recipe: Recipe) -> dict[str, RoleConfig]:
    """The roles the run uses, `same_as` resolved; ConfigError (one line, exit 2) when the policy, or any other role
    `recipe` or the filters of its chains need, is not configured (`vrag_data.teacher.roles.role_problems`)."""
    if "policy" not in cfg.roles:
        raise ConfigError("no policy role: pass --policy oracle, or --policy-url URL --policy-model NAME, or set roles.policy in the config")
    if cfg.roles["policy"].kind not in ("openai", "oracle") or cfg.roles["policy"].same_as:
        raise ConfigError(f"roles.policy: kind {cfg.roles['policy'].kind!r} cannot drive episodes; use an endpoint (kind openai) or the oracle")
    return check_roles(recipe, cfg.roles)


def policy_kind(roles: dict[str, RoleConfig]) -> str:
    return "oracle" if roles["policy"].kind == "oracle" else "model"


def default_run_id(rec: Recipe, cfg: RunConfig) -> str:
    """Content-derived: the same recipe description (prompts, grammar, environment, options, roles) + configured
    models + seed give the same run (so it resumes); any change gives a new run. `rec` is the configured recipe."""
    roles = {k: v.model_dump(mode="json") for k, v in sorted(resolved_roles(cfg, rec).items())}
    key = short_hash(rec.synth_key(), roles, cfg.synth.seed, n=10)
    return f"{rec.name}-{key}"


def _compact(run_dir: Path) -> Compaction:
    """Merge the run's small shards (the report and the exporters pay per file); another writer holding the run
    means it is not finished: leave it to that writer's own compaction."""
    try:
        return RunDir(str(run_dir)).compact()
    except VragError:
        return Compaction()


def synth(ws: Workspace | str, cfg: RunConfig, recipe: Recipe, **kwargs: object) -> RunResult:
    """Blocking entry point: the index step (`ensure_index`: the workspace's index, built when it has none), then
    `synth_async` over it (same keyword arguments)."""
    ws = ws if isinstance(ws, Workspace) else Workspace(str(ws))
    searcher, built = kwargs.pop("searcher", None), False
    if searcher is None and ws.is_local and page_index(ws):  # no pages: synth_async says so, in its one line
        searcher, built = ensure_index(ws, cfg.index)
    result = asyncio.run(synth_async(ws, cfg, recipe, searcher=searcher, **kwargs))
    result.index_built = built
    return result


async def _checked_pool(roles: dict[str, RoleConfig], run_dir: Path, run_id: str, seed: int, fresh: bool) -> TeacherPool:
    """The teacher pool with its endpoints checked before any work (missing key variable / unreachable server /
    unknown model); a run folder created only for the check is removed again when the check fails."""
    try:
        pool = TeacherPool(roles, RequestCache(run_dir), run_id, seed=seed)
        try:
            await pool.check()
        except BaseException:
            await pool.close()
            raise
    except BaseException:
        if fresh:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return pool


def _layout_by_page(ws: Workspace) -> dict[str, list[LayoutBlock]]:
    layout: dict[str, list[LayoutBlock]] = {}
    for b in load_layout(ws):
        layout.setdefault(b.page_id, []).append(b)
    return layout


async def synth_async(
    ws: Workspace | str,
    cfg: RunConfig,
    recipe: Recipe,
    run_id: str | None = None,
    samples: int | None = None,
    limit: int | None = None,
    progress: bool = True,
    on_ready: Callable[[str], None] | None = None,
    tasks: Sequence[Task] | None = None,
    searcher: Searcher | None = None,
) -> RunResult:
    """`tasks`: roll out only these (one shard of the workspace's tasks, as the Prefect flows do); default:
    every task of the workspace (up to `limit`). `searcher`: the index to search (default: the workspace's, which
    must be built: `synth` and the flows' index stage build it as a step of their own)."""
    ws = ws if isinstance(ws, Workspace) else Workspace(str(ws))
    if not ws.is_local:
        raise VragError(f"{ws.root}: synthesis runs write a local run folder; use a local workspace path")
    if not isinstance(recipe, Recipe):
        raise TypeError(f"synth: pass a configured Recipe (resolve {recipe!r} at the entry point), not {type(recipe).__name__}")
    rec = recipe
    # counts that reach here without the config model (a CLI flag, a keyword) meet the same bounds, before any work
    check_bound("synth.samples", samples, "--samples")
    check_bound("synth.limit", limit, "--limit")
    roles = resolved_roles(cfg, rec)
    cfg = cfg.model_copy(update={"roles": roles_for(rec, cfg.roles)})  # the manifest holds the roles the recipe calls
    kind = policy_kind(roles)
    samples = samples or cfg.synth.samples
    tasks = list(tasks) if tasks is not None else load_tasks(ws, limit if limit is not None else cfg.synth.limit)
    if not tasks:
        raise VragError(f"{ws.tasks}: no tasks; run `vrag-data tasks import FILE -w {ws.root}` first")
    pages = page_index(ws)
    if not pages:
        raise VragError(f"{ws.corpus_table('pages')}: no pages; run `vrag-data ingest -w {ws.root} PDFS` first")
    run_id = run_id or default_run_id(rec, cfg)
    run_dir = Path(ws.run(run_id))
    fresh = not run_dir.exists()
    pool = await _checked_pool(roles, run_dir, run_id, cfg.synth.seed, fresh)
    try:
        searcher = searcher if searcher is not None else load_index(ws)
        layout = _layout_by_page(ws)
        documents = {d.stem: d for d in load_documents(ws)}
        inner = workspace_image_loader(ws, max_pixels=rec.max_pixels, crop_min_pixels=rec.env.crop_min_pixels)
        oracle = OraclePolicy() if any(r.kind == "oracle" for r in roles.values()) else None
        responder = Responder(pool, oracle, labelled_loader(ws, inner, rec.max_pixels))
        # the roles as configured (a `same_as` stays a `same_as`), and what plays each: substitutions stay visible
        resolved = dump_resolved(cfg)
        config_hash = short_hash(resolved, rec.describe())
        resolved["role_substitutions"] = substitutions(roles)
        resolved["roles_played"] = describe_roles(cfg.roles)
        models = {**pool.models(), **{r: "oracle" for r, c in roles.items() if c.kind == "oracle"}}
        prov = Provenance(recipe=rec.name, policy=kind, models=models, prompt_hash=rec.prompt_hash(), config_hash=config_hash,
                          seed=cfg.synth.seed, code_version=code_version())
        deps = EpisodeDeps(ws=ws, run_id=run_id, recipe=rec, searcher=searcher, pages=pages, layout=layout, documents=documents,
                           responder=responder, provenance=prov, hide_rejected=True,
                           max_request_bytes=cfg.synth.max_episode_request_bytes)
        where = str(Path(ws.root).resolve()) if ws.is_local else ws.root
        manifest = RunManifest(run_id=run_id, recipe=rec.name,  # the real workspace, not the config's default name
                               config={**resolved, "workspace": where, "recipe": rec.describe(), "policy": kind,
                                       "index_used": index_kind(searcher)},
                               config_hash=config_hash, code_version=code_version(), workspace=where, samples=samples)
        if on_ready is not None:
            on_ready(run_id)
        stats = await run_episodes(tasks, samples, make_episode(deps), run_dir, concurrency=cfg.synth.concurrent_episodes,
                                   progress=progress, run_id=run_id, recipe=rec.name, policy=kind, pool=pool, manifest=manifest)
    finally:
        await pool.close()
    compaction = _compact(run_dir)
    stats_d = stats.as_dict()
    if compaction.shards:
        stats_d["compacted_shards"] = compaction.shards
    return RunResult(run_id=run_id, run_dir=str(run_dir), recipe=rec.name, policy=kind, n_tasks=len(tasks), samples=samples,
                     stats=stats_d)
