"""`judge_and_filter(ws, run_id, cfg)`: judge every trajectory of a run (cached), run the recipe's filter chain
(or the config's), write `runs/<run>/verdicts/filters.parquet`, then apply the recipe's augmentations to the
kept trajectories -> `runs/<run>/trajectories/aug-<recipe>.parquet`, each flagged with
`extra["augmentation"]` and `extra["source_traj_id"]` (exports let it inherit its source's verdicts). When the recipe has an RL chain
(`Recipe.rl_filters`), it runs over every judged trajectory (not only the SFT-kept ones: a task can be RL data
without being SFT data, and a quality-rejected task may be the RL data the recipe wants first), with the SFT
chain's verdicts at hand, and its verdicts go to `runs/<run>/verdicts/rl/` (`RunDir.write_rl_verdicts`).

The judge is the configured `roles.judge`: a model judge when it has an endpoint (its calls go through the run's
request cache, so re-filtering pays nothing twice), the rule scorers for `kind: rules`, the policy's model for
`same_as: policy` (recorded in every verdict it gives). A recipe role left unconfigured stops the stage with one
line. Every correctness decision of the stage (filters, augmentations, the student's attempts) is the judge's. EVisRAG
trajectories whose pages were insufficient are judged against "insufficient to answer". Re-running
replaces the verdict and augmentation files atomically: the result is the same, nothing piles up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.augment import AugmentError
from vrag_data.filters.drops import drop_causes
from vrag_data.augment.base import TeacherFor
from vrag_data.config import RoleConfig, RunConfig
from vrag_data.errors import VragError
from vrag_data.filters.base import FilterContext, apply_chain
from vrag_data.filters.judging import judge_lookup, judge_trajectories
from vrag_data.filters.registry import FilterChain
from vrag_data.progress import stage_progress
from vrag_data.recipe.base import Recipe
from vrag_data.schema.records import RunManifest, Task, Trajectory, Verdict
from vrag_data.store.corpus import page_index
from vrag_data.store.workspace import Workspace
from vrag_data.student.stage import student_results
from vrag_data.synth.oracle import OracleAugmenter
from vrag_data.teacher.messages import ImageLoader, workspace_image_loader
from vrag_data.store.run import RunDir
from vrag_data.synth.ledger import read_manifest
from vrag_data.tasks.store import load_tasks
from vrag_data.teacher.cache import RequestCache
from vrag_data.teacher.judge import Judge, make_judge
from vrag_data.teacher.pool import TeacherPool
from vrag_data.teacher.roles import check_roles



class FilterResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    recipe: str
    chain: list[str]
    judge: str  # "model" or "rules"
    judge_label: str = ""  # who judged: "rules", or "judge <model>" (+ " (same_as policy)")
    student: str = ""  # who answered for the difficulty filters: "model:<name>", "extractive", "none" (rule skipped)
    n_trajectories: int
    n_kept: int
    per_filter: dict[str, dict[str, int]] = Field(default_factory=dict)  # name -> {"passed": n, "failed": n}
    judge_errors: int = 0
    verdicts_path: str = ""
    n_augmented: int = 0
    augmented_path: str = ""
    augment_skipped: list[str] = Field(default_factory=list)
    rl_chain: list[str] = Field(default_factory=list)  # the RL chain's filters ([]: RL rows from the SFT-kept set)
    n_rl_kept: int | None = None  # trajectories the RL chain kept (None without an RL chain)
    rl_verdicts_path: str = ""
    drops: list[str] = Field(default_factory=list)  # the largest drop causes, each with the settings that control it

    @property
    def message(self) -> str:
        steps = ", ".join(f"{k} {v.get('passed', 0)}/{v.get('passed', 0) + v.get('failed', 0)}" for k, v in self.per_filter.items())
        aug = f"; {self.n_augmented} augmented trajectories -> {self.augmented_path}" if self.n_augmented else ""
        who = f"; student: {self.student}" if self.student else ""
        rl = "" if self.n_rl_kept is None else f"; RL data: kept {self.n_rl_kept} ({', '.join(self.rl_chain)}) -> {self.rl_verdicts_path}"
        judge = self.judge_label or self.judge
        return (f"run {self.run_id} ({self.recipe}): kept {self.n_kept} of {self.n_trajectories} (judge: {judge}{who}; {steps})"
                f" -> {self.verdicts_path}{aug}{rl}")




def _roles(cfg: RunConfig | None, manifest_config: dict[str, Any], recipe: Recipe) -> dict[str, RoleConfig]:
    """The run's roles (from its manifest, as configured), with the roles the filter's config names replacing
    theirs; a role the recipe uses and neither configures stops here (ConfigError, one line)."""
    raw = manifest_config.get("roles") or {}
    roles = {k: RoleConfig.model_validate(v) for k, v in raw.items()}
    if cfg is not None:
        roles.update(cfg.roles)
    return check_roles(recipe, roles)


async def _augment(recipe: Recipe, kept: list[Trajectory], tasks: dict[str, Task], doc_pages: dict[str, list[str]],
                   teacher_for: TeacherFor | None, judge: Judge) -> tuple[list[Trajectory], list[str], dict[str, str]]:
    """(augmented trajectories, skipped reasons, {replaced source traj_id: its replacement's traj_id})."""
    out: list[Trajectory] = []
    skipped: list[str] = []
    replaced: dict[str, str] = {}
    for aug in recipe.augmentations:
        for t in kept:
            task = tasks[t.task_id]
            try:
                if hasattr(aug, "apply_async") and teacher_for is not None:
                    res = await aug.apply_async(t, task, recipe.grammar, doc_pages, teacher_for(task), judge=judge)
                else:
                    res = aug.apply(t, task, recipe.grammar, doc_pages)
            except AugmentError as err:
                skipped.append(f"{aug.name}: {err}")
                continue
            skipped += [f"{aug.name}: {x}" if x.startswith(t.traj_id) else f"{aug.name}: {t.traj_id}: {x}" for x in res.skipped]
            for new in res.variants:
                new.extra["source_traj_id"] = t.traj_id  # exports inherit the source's verdicts through this key
                if getattr(aug, "replaces_source", False):
                    replaced[t.traj_id] = new.traj_id
            out += res.variants
    return out, skipped, replaced


def _teachers(pool: TeacherPool | None, roles: dict[str, RoleConfig], loader: ImageLoader) -> TeacherFor:
    """`teacher_for(task)`: the run's policy role when it is an endpoint, the oracle augmenter for that task when the
    run's policy is the oracle; anything else stops the stage with one line."""
    policy = roles.get("policy")
    if policy is None or policy.kind not in ("openai", "oracle") or (policy.kind == "openai" and pool is None):
        raise VragError("augmentations need the run's teacher: roles.policy must be an endpoint or the oracle")
    if policy.kind == "openai":
        assert pool is not None
        async def ask(messages: list, sample: int, purpose: str = "") -> str:
            res = await pool.chat("policy", messages, sample=sample, image_loader=loader)
            if res.problem:  # the one door: an unusable reply builds no record, whatever it says
                raise AugmentError(f"the teacher's {purpose or 'augmentation'} reply is unusable ({res.problem})")
            return res.text

        ask.label = f"model:{policy.endpoints[0].model if policy.endpoints else 'policy'}"  # type: ignore[attr-defined]
        return lambda task: ask
    return OracleAugmenter


def judge_and_filter(ws: Workspace | str, run_id: str, cfg: RunConfig | None, recipe: Recipe,
                     progress: bool = False) -> FilterResult:
    return asyncio.run(judge_and_filter_async(ws, run_id, cfg, recipe, progress))


async def judge_and_filter_async(ws: Workspace | str, run_id: str, cfg: RunConfig | None, recipe: Recipe,
                                 progress: bool = False) -> FilterResult:
    """`recipe`: the run's configured recipe object (the caller resolves the name its manifest records); its filter
    chain and augmentations apply. The run records the filter's state (`RunDir.mark_filter`): running, then finished
    or failed with its reason, so an export never takes a failed or unfinished filter for a finished one."""
    ws = ws if isinstance(ws, Workspace) else Workspace(str(ws))
    run_dir = Path(ws.run(run_id))
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise VragError(f"{run_dir}: no run manifest; run `vrag-data synth -w {ws.root} --recipe R --run {run_id}` first")
    if recipe.name != manifest.recipe:
        raise VragError(f"{run_dir}: run of recipe {manifest.recipe!r}, not {recipe.name!r}")
    rd = RunDir(str(run_dir))
    if not ws.is_local:
        return await _judge_and_filter(ws, run_id, cfg, recipe, progress, rd, run_dir, manifest)
    rd.mark_filter("running")
    try:
        res = await _judge_and_filter(ws, run_id, cfg, recipe, progress, rd, run_dir, manifest)
    except BaseException as err:  # a stop of any kind (an error, Ctrl-C, a cancelled flow) is recorded, then raised
        rd.mark_filter("failed", f"{type(err).__name__}: {err}" if not isinstance(err, VragError) else str(err))
        raise
    rd.mark_filter("finished")
    return res


async def _judge_and_filter(ws: Workspace, run_id: str, cfg: RunConfig | None, recipe: Recipe, progress: bool,
                            rd: RunDir, run_dir: Path, manifest: RunManifest | None) -> FilterResult:
    try:
        rd.compact()  # small shards a synth left (e.g. one killed before its own compaction) are merged first
    except VragError:
        pass  # a writer holds the run: its own compaction will do it
    newest = rd.newest()
    trajs = list(rd.episodes())
    if not trajs:
        raise VragError(f"{rd.trajectories_dir}: no trajectories to filter")
    tasks = {t.task_id: t for t in load_tasks(ws)}
    roles = _roles(cfg, manifest.config, recipe)
    chain = FilterChain(list(recipe.filters))
    rl_chain = FilterChain(list(recipe.rl_filters))
    rl_kept: list[Trajectory] | None = None
    rl_verdicts: list[Verdict] = []
    pool = TeacherPool(roles, RequestCache(run_dir), run_id) if roles else None
    # one progress line for the whole stage (counted by judged trajectories): its "done" only when all of it is
    with stage_progress(f"filter {run_id} (judged)", len(trajs), enabled=progress) as tick:
        try:
            if pool is not None and pool.kind("judge") == "openai":
                await pool.check()
            judge = make_judge(pool)
            kind = "model" if pool is not None and pool.kind("judge") == "openai" else "rules"
            scores, errors = await judge_trajectories(trajs, tasks, judge, on_done=tick)
            pages = page_index(ws)
            needed = [tasks[i] for i in dict.fromkeys(t.task_id for t in trajs) if i in tasks]
            student, student_label = await student_results(chain.filters, roles, pool, ws, run_dir, needed, pages, recipe, judge)
            ctx = FilterContext(tasks=tasks, judge=judge_lookup(scores, errors, judge.label), student_results=student,
                                page_sizes={p: (pg.width, pg.height) for p, pg in pages.items()})
            known = [t for t in trajs if t.task_id in tasks]
            kept, verdicts = apply_chain(known, tasks, chain, ctx)
            if rl_chain.filters:
                rl_student, rl_label = await student_results(rl_chain.filters, roles, pool, ws, run_dir, needed, pages, recipe,
                                                             judge, stage="rl")
                student_label = student_label or rl_label
                by_traj: dict[str, list[Verdict]] = {}
                for v in verdicts:
                    by_traj.setdefault(v.traj_id, []).append(v)
                rl_ctx = FilterContext(tasks=tasks, judge=ctx.judge, student_results=rl_student, page_sizes=ctx.page_sizes,
                                       sft_verdicts=by_traj)
                rl_kept, rl_verdicts = apply_chain(known, tasks, rl_chain, rl_ctx)
            verdicts += [Verdict(run_id=t.run_id, traj_id=t.traj_id, task_id=t.task_id, filter="task", passed=False,
                                 reason=f"task {t.task_id} not found in {ws.tasks}") for t in trajs if t.task_id not in tasks]
            doc_pages: dict[str, list[str]] = {}
            for p in sorted(pages.values(), key=lambda p: (p.stem, p.page)):
                doc_pages.setdefault(p.stem, []).append(p.page_id)
            loader = workspace_image_loader(ws, max_pixels=recipe.max_pixels, crop_min_pixels=recipe.env.crop_min_pixels)
            teachers = _teachers(pool, roles, loader) if recipe.augmentations else None
            augmented, skipped, replaced = await _augment(recipe, kept, tasks, doc_pages, teachers, judge)
        finally:
            if pool is not None:
                await pool.close()
    by_id = {t.traj_id: t for t in kept}
    for src, new in replaced.items():  # the augmented copy replaces its source in the SFT data (recorded)
        t = by_id[src]
        verdicts.append(Verdict(run_id=t.run_id, traj_id=src, task_id=t.task_id, filter="augmentation", passed=False,
                                reason=f"replaced by its augmented copy {new}"))
    for a in augmented:
        verdicts.append(Verdict(run_id=a.run_id, traj_id=a.traj_id, task_id=a.task_id, filter="augmentation", passed=True,
                                reason=f"{a.extra.get('augmentation')} of {a.extra.get('source_traj_id')} by {a.extra.get('augmented_by', 'rules')}"))
    # the RL verdicts first: the fingerprint written with the SFT verdicts covers both
    rl_path = rd.write_rl_verdicts(rl_verdicts if rl_chain.filters else None)
    vpath = rd.write_verdicts(verdicts, judged=newest)  # with the fingerprint of the episodes judged
    per: dict[str, dict[str, int]] = {}
    for v in verdicts:
        d = per.setdefault(v.filter, {"passed": 0, "failed": 0})
        d["passed" if v.passed else "failed"] += 1
    apath = rd.write_augmented(manifest.recipe, augmented)  # none: an earlier filter run's no longer apply
    return FilterResult(run_id=run_id, recipe=manifest.recipe, chain=chain.names, judge=kind, judge_label=judge.label,
                        student=student_label, n_trajectories=len(trajs),
                        n_kept=len(kept) - len(replaced), per_filter=per, judge_errors=len(errors), verdicts_path=vpath,
                        n_augmented=len(augmented), augmented_path=apath, augment_skipped=skipped, rl_chain=rl_chain.names,
                        n_rl_kept=None if rl_kept is None else len(rl_kept), rl_verdicts_path=rl_path,
                        drops=drop_causes(verdicts, {manifest.recipe: chain.filters}, lambda _: manifest.recipe, len(trajs)))
