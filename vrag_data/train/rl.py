"""Multi-turn GRPO-family RL: group rollouts in the environment, rewards from `vrag_data.rewards`,
advantages from `advantages` (grpo / rs_grpo / spo), clipped token-level loss with optional KL.

Several GPUs: start one process per GPU (`torchrun` / `accelerate launch`); each rank rolls out its own
share of the tasks on a full replica and gradients are averaged once per optimiser step, so ranks may
have different numbers of turns and tokens without deadlocking.
"""

from __future__ import annotations

import copy
import json
import os
import math
import random
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.progress import stage_progress
from vrag_data.recipe.base import Recipe
from vrag_data.rewards.registry import get_reward
from vrag_data.schema.records import Trajectory
from vrag_data.store import write_records
from vrag_data.train import advantages as adv_fns
from vrag_data.train.config import TrainConfig
from vrag_data.train.embed import load_embedder
from vrag_data.train.judging import AnswerJudge
from vrag_data.train.episode import Episode, PolicyResponder, make_deps, rollout_step, trajectory_text
from vrag_data.train.engines import make_engine
from vrag_data.train.update import training_rows, update_policy
from vrag_data.train.model import Policy, load_policy, save_bytes
from vrag_data.train.rl_env import RlEnvironment
from vrag_data.train.rollout import PolicySampler, token_scopes
from vrag_data.train.checkpoint import check_space, last_checkpoint, rotate, seal, staging_dir
from vrag_data.train.speed import note

# a random tiny policy answers nothing right: every reward is 0, so every advantage, loss and KL is 0 too
TINY_MODEL_NOTE = ("train rl: the bundled tiny test model (model.path unset) has random weights, so reward, loss and kl "
                   "of 0 are expected: this run checks the pipeline, not learning; set model.path to a real policy to train")


@dataclass
class RlStepLog:
    step: int
    reward_mean: float
    reward_std: float
    adv_abs_mean: float
    loss: float
    kl: float
    clip_frac: float
    tokens: int
    turns: int
    trajectories: int
    statuses: dict[str, int] = field(default_factory=dict)
    rollout_s: float = 0.0  # wall time of the step's rollouts
    generated_tokens: int = 0  # response tokens the policy generated in them
    generate_calls: int = 0  # engine calls they took (batched: about one per decoding round)


@dataclass
class RlResult:
    output_dir: Path
    global_step: int
    logs: list[RlStepLog]
    resumed_from: str | None = None


def _dist() -> tuple[int, int, torch.device]:
    """(rank, world size, device). Under torchrun / accelerate launch (WORLD_SIZE > 1) the process group is
    started here: NCCL with one GPU per process, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1 and torch.distributed.is_available() and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if cuda else "gloo")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size(), device
    return 0, 1, device


def group_advantages(cfg: TrainConfig, episodes: list[Episode], breakdowns: list[Any], embedder: Any,
                     tokenizer: Any, scopes: Mapping[str, Sequence[str]] | None = None) -> list[list[list[float]]]:
    """Per episode, per turn, per response token: the advantage the loss multiplies."""
    rl = cfg.rl
    totals = [b.total for b in breakdowns]
    if rl.estimator == "grpo":
        traj_adv = adv_fns.grpo(totals, rl.scale_std)
        return [[[a] * len(s.response_ids) for s in ep.samples] for a, ep in zip(traj_adv, episodes, strict=True)]
    if rl.estimator == "spo":
        vecs = embedder.embed([trajectory_text(ep.trajectory) for ep in episodes])
        traj_adv = adv_fns.spo(totals, vecs, scale_std=False)
        return [[[a] * len(s.response_ids) for s in ep.samples] for a, ep in zip(traj_adv, episodes, strict=True)]
    # rs_grpo: component rewards -> per-scope advantages -> each token takes its scope's advantage
    components: dict[str, list[float]] = defaultdict(list)
    for b in breakdowns:
        for k, v in b.components.items():
            components[k].append(float(v))
    if rl.scopes:
        scopes = rl.scopes
    if not scopes:
        raise VragError(f"rs_grpo: recipe {rl.recipe!r} names no token scopes for its reward; set rl.scopes in the config")
    try:
        scope_adv = adv_fns.rs_grpo(components, scopes, rl.rs_mode, rl.scale_std)
    except KeyError as err:
        raise VragError(f"rs_grpo with recipe {rl.recipe!r}: {err.args[0]}; fix rl.scopes in the config") from None
    names = [s for s in scopes if s != "other"]
    out = []
    for i, ep in enumerate(episodes):
        per_turn = []
        for s in ep.samples:
            s.scopes = token_scopes(tokenizer, s.response_ids, names, "other")
            per_turn.append([scope_adv[sc][i] if sc in scope_adv else 0.0 for sc in s.scopes])
        out.append(per_turn)
    return out


def _save(policy: Policy, optimizer: Any, step: int, out: Path, keep: int | None) -> None:
    check_space(out, save_bytes(policy.model, optimizer=True), f"the resumable checkpoint of step {step}")
    tmp = staging_dir(out, step)  # written whole, then sealed and renamed: a kill leaves no half checkpoint
    policy.save(tmp)
    torch.save({"optimizer": optimizer.state_dict(), "step": step, "rng": torch.get_rng_state(),
                "py_rng": random.getstate()}, tmp / "rl_state.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    seal(tmp, out / f"checkpoint-{step}", step)
    rotate(out, keep)


@dataclass
class _Run:
    """Everything a step needs, built once by `_setup` (a resumed run: from the newest sealed checkpoint)."""
    out: Path
    rank: int
    world: int
    env: Any
    recipe: Recipe
    policy: Policy
    model: Any
    ref: Any
    params: list[Any]
    optimizer: Any
    sched: Any
    start: int
    ckpt: Path | None
    scopes: dict[str, list[str]]
    embedder: Any
    engine: Any
    responder: Any
    deps: Any
    judge: AnswerJudge


def run_rl(cfg: TrainConfig, recipe: Recipe, resume: bool = True, progress: bool = False) -> RlResult:
    """`recipe`: the configured recipe object to roll out (the entry point resolves `cfg.rl.recipe`)."""
    _check(cfg)
    run = _setup(cfg, recipe, resume)
    rl, out = cfg.rl, run.out
    logs: list[RlStepLog] = []
    with (out / "metrics.jsonl").open("a") as metrics, \
            stage_progress("train rl (steps)", rl.max_steps, enabled=progress and run.rank == 0) as tick:
        tick(completed=run.start)
        for step in range(run.start, rl.max_steps):
            log = _step(cfg, run, step)
            logs.append(log)
            if run.rank == 0:
                metrics.write(json.dumps(log.__dict__) + "\n")
                metrics.flush()
                if rl.save_steps and (step + 1) % rl.save_steps == 0:
                    _save(run.policy, run.optimizer, step + 1, out, rl.save_total_limit)
            tick(completed=step + 1, info=f"reward {log.reward_mean:.3f} loss {log.loss:.4f} kl {log.kl:.4f} turns {log.turns}")
    run.judge.close()
    final_step = max(run.start, rl.max_steps)
    if run.rank == 0:
        if rl.save_steps and not (out / f"checkpoint-{final_step}").is_dir():  # resumable checkpoints were asked for
            _save(run.policy, run.optimizer, final_step, out, rl.save_total_limit)
        check_space(out, save_bytes(run.policy.model, cfg.final_dtype), "the final model")
        run.policy.save(out / "final", cfg.final_dtype)
    return RlResult(out, final_step, logs, str(run.ckpt) if run.ckpt else None)


def _check(cfg: TrainConfig) -> None:
    """The settings a run cannot start without, each refused in one line before any model is loaded."""
    rl = cfg.rl
    if rl.judge is None:
        raise VragError("rl.judge: name the answer judge: an endpoint (`judge: {endpoints: [{base_url: URL, model: NAME}]}`) "
                        "or `judge: rules` for the rule scorers")
    if cfg.model.dtype == "float16":
        raise VragError("model.dtype float16: RL has no loss scaling; use bfloat16 (fp32 master weights) or float32")
    if rl.estimator == "spo" and not rl.embedder:
        raise VragError("rl.embedder: SPO needs a trajectory embedder; name one (`module:factory`, e.g. a BGE-M3 wrapper "
                        "as in the paper) or `hashed-bow` for the offline stand-in")


def _setup(cfg: TrainConfig, recipe: Recipe, resume: bool) -> _Run:
    rl = cfg.rl
    rank, world, device = _dist()
    env = RlEnvironment.open(cfg.workspace, cfg.data.path)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    ckpt = last_checkpoint(out, primary=rank == 0) if resume else None
    model_cfg = cfg.model.model_copy(update={"path": str(ckpt)}) if ckpt else cfg.model
    texts = [f"{t.question} {t.answer}" for t in env.tasks]
    policy = load_policy(model_cfg, texts)
    model = policy.model.to(device)
    model.train()
    ref = None
    if rl.kl_coef > 0:
        ref = copy.deepcopy(model).eval()
        ref.requires_grad_(False)
        if ckpt:  # the reference is the starting policy, not the resumed one (tiny models rebuild identically)
            ref = load_policy(cfg.model, texts).model.to(device).eval().requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=rl.learning_rate, weight_decay=rl.weight_decay)
    start = _restore(cfg, optimizer, ckpt, rank)
    warmup = math.ceil(rl.warmup_ratio * rl.max_steps)
    # linear warm-up, then constant; a resumed run continues the schedule at its step
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0,
                                              last_epoch=start - 1 if start else -1)
    recipe = recipe.for_rl(rl.max_turns, cfg.model.max_pixels, cfg.model.coord_space)
    engine, responder = _rollout_side(cfg, recipe, env, policy, model_cfg.path, out, rank)
    run_id = f"rl-{short_hash(str(out.resolve()))}"
    return _Run(out, rank, world, env, recipe, policy, model, ref, params, optimizer, sched, start, ckpt,
                scopes={k: list(v) for k, v in recipe.reward.scopes.items()},
                embedder=load_embedder(rl.embedder) if rl.estimator == "spo" and rl.embedder else None,
                engine=engine, responder=responder, deps=make_deps(env, recipe, responder, run_id),
                judge=AnswerJudge(rl.judge, out, run_id, honesty=get_reward(recipe.reward.name).honesty_gate))


def _restore(cfg: TrainConfig, optimizer: Any, ckpt: Path | None, rank: int) -> int:
    """Seed the generators and, when resuming, restore the optimiser and rank 0's generators; the step to start at."""
    rl = cfg.rl
    # seeded after the model is built (building a tiny model reseeds); each rank samples differently
    random.seed(rl.seed + rank)
    torch.manual_seed(rl.seed + rank)
    if not ckpt:
        return 0
    state = torch.load(ckpt / "rl_state.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    start = int(state["step"])
    if rank == 0:  # the saved generator state is rank 0's; other ranks reseed per resumed step
        torch.set_rng_state(state["rng"])
        random.setstate(state["py_rng"])
    else:
        torch.manual_seed(rl.seed + rank + 7919 * start)
    return start


def _rollout_side(cfg: TrainConfig, recipe: Recipe, env: Any, policy: Policy, model_path: str | None, out: Path,
                  rank: int) -> tuple[Any, PolicyResponder]:
    """The generation engine and the responder that plays the policy in the recipe's environment."""
    rl, ro = cfg.rl, cfg.rl.rollout
    engine_dir = None
    if ro.engine == "vllm":  # vLLM loads a model folder: the starting policy as saved (synced after each update)
        engine_dir = Path(model_path) if model_path else out / "rollout-init"
        if not model_path and rank == 0:
            policy.save(engine_dir)
    engine = make_engine(ro.engine, policy, max_new_tokens=rl.max_new_tokens, temperature=rl.temperature,
                         top_p=rl.top_p, max_batch_size=ro.max_batch_size if ro.concurrent else 1,
                         model_dir=engine_dir,
                         **({"gpu_memory_utilization": ro.vllm_gpu_memory_utilization,
                             "max_model_len": cfg.data.cutoff_len + rl.max_new_tokens,
                             "min_pixels": cfg.model.min_pixels, "max_pixels": cfg.model.max_pixels,
                             "seed": rl.seed + rank} if ro.engine == "vllm" else {}))
    sampler = PolicySampler(policy, env.image_loader(recipe.env.page_min_pixels, recipe.env.page_max_pixels,
                                                     recipe.env.page_resize),
                            rl.max_new_tokens, rl.temperature, rl.top_p, cfg.data.default_system,
                            max_context=cfg.data.cutoff_len, engine=engine)
    if rank == 0:
        note(f"train rl: precision {policy.precision.describe()}; rollouts: engine {ro.engine}, "
             + (f"episodes of a step together, up to {ro.max_batch_size} sequences per generate call"
                if ro.concurrent else "one episode and one sequence at a time"))
        if cfg.model.path is None:  # the bundled tiny model (model.tiny): random weights, nothing to learn from
            note(TINY_MODEL_NOTE)
    return engine, PolicyResponder(sampler, concurrent=ro.concurrent)


def _step(cfg: TrainConfig, run: _Run, step: int) -> RlStepLog:
    """One optimiser step: roll out each task's group, judge and score it, update, keep the rollouts."""
    from vrag_data.rewards.recipes import score_trajectory

    rl = cfg.rl
    episodes: list[Episode] = []
    breakdowns: list[Any] = []
    advs: list[list[list[float]]] = []
    # sample numbers are unique per (step, rank, slot): trajectory ids never collide across steps/ranks
    tasks = run.env.tasks
    jobs = [(tasks[(step * rl.tasks_per_step * run.world + k * run.world + run.rank) % len(tasks)],
             ((step * run.world + run.rank) * rl.tasks_per_step + k) * rl.group_size) for k in range(rl.tasks_per_step)]
    t0, calls0 = time.perf_counter(), run.engine.calls
    rolled = rollout_step(run.deps, run.responder, jobs, rl.group_size)
    rollout_s = time.perf_counter() - t0
    calls = run.engine.calls - calls0
    for k, (task, _) in enumerate(jobs):
        group = rolled[k * rl.group_size : (k + 1) * rl.group_size]
        judged = run.judge.scores([ep.trajectory for ep in group], task)
        scores = [score_trajectory(ep.trajectory, task, run.recipe.reward.name, judge_score=j, honesty_score=h)
                  for ep, (j, h) in zip(group, judged, strict=True)]
        advs.extend(group_advantages(cfg, group, scores, run.embedder, run.policy.tokenizer, run.scopes))
        episodes.extend(group)
        breakdowns.extend(scores)
    stats = update_policy(run.policy, run.ref, run.optimizer, run.params, training_rows(episodes, advs), rl, run.world)
    run.engine.sync_weights(run.model)
    run.sched.step()
    # every rank keeps its own rollouts (with their reward breakdown); metrics are rank 0's share
    trajs = [ep.trajectory.model_copy(update={"extra": {**ep.trajectory.extra, "reward": b.as_dict()}})
             for ep, b in zip(episodes, breakdowns, strict=True)]
    shard = f"step-{step + 1:06d}" + (f"-rank{run.rank}" if run.world > 1 else "") + ".parquet"
    write_records(run.out / "rollouts" / shard, trajs, Trajectory)
    return _step_log(step, episodes, breakdowns, advs, stats, rollout_s, calls)


def _step_log(step: int, episodes: list[Episode], breakdowns: list[Any], advs: list[list[list[float]]],
              stats: dict[str, float], rollout_s: float, calls: int) -> RlStepLog:
    totals = [b.total for b in breakdowns]
    mean = sum(totals) / len(totals)
    statuses: dict[str, int] = defaultdict(int)
    for ep in episodes:
        statuses[ep.trajectory.status] += 1
    flat_adv = [a for per in advs for turn in per for a in turn]
    return RlStepLog(
        step=step + 1,
        reward_mean=mean,
        reward_std=math.sqrt(sum((t - mean) ** 2 for t in totals) / len(totals)),
        adv_abs_mean=sum(abs(a) for a in flat_adv) / max(len(flat_adv), 1),
        loss=stats["loss"],
        kl=stats["kl"],
        clip_frac=stats["clip"],
        tokens=int(stats["tokens"]),
        turns=sum(len(ep.samples) for ep in episodes),
        trajectories=len(episodes),
        statuses=dict(statuses),
        rollout_s=round(rollout_s, 3),
        generated_tokens=sum(len(s.response_ids) for ep in episodes for s in ep.samples),
        generate_calls=calls,
    )
