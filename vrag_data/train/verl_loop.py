"""verl's agent loop running this project's episodes (imported only by verl: it needs verl installed).

verl builds one `VragAgentLoop` per trajectory from `<output>/verl/agent_loop.yaml` (written by
`vrag_data.train.verl_config`), with the recipe already resolved by Hydra and this train config's path. `run`
rolls the row's task out through `verl_episode` (the synthesis episode loop: recipe prompts, grammar, context
policy, environment with search / select / crop / read, forced answer, budgets) with verl's server manager as the
policy, and returns prompt ids, response ids, the response mask (observation tokens 0) and the page images as
multi-modal data. The reward is left to verl's reward loop, i.e. the export's `reward/compute_score.py` with the
judge of the train config; the loop hands it what the agent saw and did in `extra_fields` (merged into
`extra_info`), so it scores the trajectory as the bundled trainer's `score_trajectory` does.
"""

from __future__ import annotations

import functools
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from vrag_data.errors import VragError
from vrag_data.ids import short_hash
from vrag_data.recipe.base import Recipe
from vrag_data.synth.episode import run_episode
from vrag_data.train.config import TrainConfig, load_train_config
from vrag_data.train.episode import make_deps
from vrag_data.train.rl_env import RlEnvironment
from vrag_data.train.verl_config import AGENT_NAME
from vrag_data.train.verl_episode import ContextEncoder, StreamResponder, reward_fields


@functools.lru_cache(maxsize=4)
def _environment(workspace: str, data: str | None) -> RlEnvironment:
    """One environment per worker process (verl builds a loop per trajectory; the corpus and index load once)."""
    return RlEnvironment.open(workspace, data)


@functools.lru_cache(maxsize=4)
def _train_config(path: str) -> TrainConfig:
    return load_train_config(path)


@register(AGENT_NAME)
class VragAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, train_config: str, recipe: Recipe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cfg = _train_config(str(train_config))
        rl, model = self.cfg.rl, self.cfg.model
        self.recipe = recipe.for_rl(rl.max_turns, model.max_pixels, model.coord_space)
        self.env = _environment(str(self.cfg.workspace), self.cfg.data.path)
        self.tasks = {t.task_id: t for t in self.env.tasks}

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = kwargs.get("extra_info") or {}
        task = self.tasks.get(str(info.get("task_id")))
        if task is None:
            raise VragError(f"extra_info.task_id {info.get('task_id')!r} is not a task of workspace {self.cfg.workspace}; "
                            "export and train from the same workspace")
        r = self.recipe.env
        encoder = ContextEncoder(self.tokenizer, self.processor.image_processor,
                                 self.env.image_loader(r.page_min_pixels, r.page_max_pixels, r.page_resize),
                                 self.cfg.data.default_system)
        request_id = uuid4().hex  # one sticky session per episode: its calls share a growing prefix

        async def generate(ids: list[int], images: list[Any], max_tokens: int) -> tuple[list[int], list[float] | None]:
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                     sampling_params={**sampling_params, "max_tokens": max_tokens},
                                                     image_data=images or None)
            return list(out.token_ids), (list(out.log_probs) if out.log_probs else None)

        v = self.cfg.verl
        responder = StreamResponder(encoder, generate, max_new_tokens=self.cfg.rl.max_new_tokens,
                                    prompt_length=self.rollout_config.prompt_length,
                                    response_length=self.rollout_config.response_length, on_rewrite=v.on_rewrite)
        deps = make_deps(self.env, self.recipe, responder, f"verl-{short_hash(str(self.cfg.output_dir))}")  # type: ignore[arg-type]
        traj = await run_episode(deps, task, int(request_id[:8], 16))
        return to_output(responder, traj)


def to_output(responder: StreamResponder, traj: Any) -> AgentLoopOutput:
    s = responder.stream
    extra = {**reward_fields(traj), "segments": s.segments, "turn_scores": [], "tool_rewards": []}
    return AgentLoopOutput(
        prompt_ids=s.prompt_ids, response_ids=s.response_ids, response_mask=s.response_mask,
        response_logprobs=s.logprobs if s.logprobs and len(s.logprobs) == len(s.response_ids) else None,
        multi_modal_data={"images": list(s.images)} if s.images else {},
        num_turns=2 * len(s.calls) + 1,
        metrics=AgentLoopMetrics(generate_sequences=s.generate_s),
        extra_fields=extra,
    )
