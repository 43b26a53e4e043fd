"""RL rollouts through the same episode loop as synthesis (`vrag_data.synth.episode.run_episode`).

The recipe supplies the prompts, environment settings, context policy and hooks; only the responder changes:
every role is answered by the policy model being trained (the VRAG-RL grounding expert is switched off, as in
its RL stage), and each call is kept as a `TurnSample` (context tokens, response tokens, images) so the loss
sees exactly what the model generated and nothing of the prompt or the observations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vrag_data.schema.records import Document, Message, Provenance, Task, Trajectory
from vrag_data.synth.episode import EpisodeDeps, Reply, Responder, run_episode
from vrag_data.teacher.pool import TeacherError
from vrag_data.train.rollout import ContextTooLong, PolicySampler, TurnSample


@dataclass
class Episode:
    trajectory: Trajectory
    samples: list[TurnSample]  # every generation of the trained roles, in order


class PolicyResponder(Responder):
    """Answers roles with the policy model; generations of `train_roles` are kept for the loss.

    `concurrent`: requests go through the sampler's round batcher (episodes run together, one generate call per
    decoding round); otherwise each request is generated on its own as it comes."""

    def __init__(self, sampler: PolicySampler, train_roles: Sequence[str] = ("policy",),
                 concurrent: bool = False) -> None:
        super().__init__(None, None, None)
        self.sampler = sampler
        self.train_roles = set(train_roles)
        self.concurrent = concurrent
        self.samples: dict[tuple[str, int], list[TurnSample]] = {}

    def kind(self, role: str) -> str:
        return "policy-model"

    async def ask(self, role: str, messages: list[Message], ep: Any, phase: str) -> Reply:
        try:
            if self.concurrent:
                sample = await self.sampler.sample_async(messages)
            else:
                sample = self.sampler.sample(messages)
        except ContextTooLong as err:  # ends the episode with status "error", like a failing endpoint
            raise TeacherError(str(err)) from None
        if role in self.train_roles:
            self.samples.setdefault((ep.task.task_id, ep.sample), []).append(sample)
        return Reply(sample.response_text, prompt_tokens=len(sample.context_ids),
                     completion_tokens=len(sample.response_ids))


def make_deps(env: Any, recipe: Any, responder: PolicyResponder, run_id: str) -> EpisodeDeps:
    return EpisodeDeps(
        ws=env.ws, run_id=run_id, recipe=recipe, searcher=env.searcher, pages=env.pages, layout=env.layout,
        documents=env.documents, responder=responder,
        provenance=Provenance(recipe=recipe.name, policy="model", models={"policy": "trainer"}),
    )


def rollout_group(deps: EpisodeDeps, responder: PolicyResponder, task: Task, group_size: int,
                  first_sample: int = 0) -> list[Episode]:
    """`group_size` episodes of one task (see `rollout_step`)."""
    return rollout_step(deps, responder, [(task, first_sample)], group_size)


def rollout_step(deps: EpisodeDeps, responder: PolicyResponder, jobs: Sequence[tuple[Task, int]],
                 group_size: int) -> list[Episode]:
    """Every episode of a step: for each (task, first sample number) `group_size` episodes, returned task by task
    in sample order. With a concurrent responder they all run at once through the async episode loop and each
    decoding round is one batched generate call; otherwise one after the other (the same episodes, token for
    token at temperature 0)."""
    runs = [(task, g) for task, first in jobs for g in range(first, first + group_size)]
    if responder.concurrent:
        batcher = responder.sampler.batcher

        async def one(task: Task, g: int) -> Trajectory:
            try:
                return await run_episode(deps, task, g)
            finally:
                batcher.close()

        async def every() -> list[Trajectory]:
            batcher.open(len(runs))  # all registered before the first one asks
            return list(await asyncio.gather(*(one(t, g) for t, g in runs)))

        trajs = asyncio.run(every())
    else:
        trajs = [asyncio.run(run_episode(deps, task, g)) for task, g in runs]
    return [Episode(traj, responder.samples.pop((task.task_id, g), [])) for (task, g), traj in zip(runs, trajs, strict=True)]


def trajectory_text(traj: Trajectory) -> str:
    """What SPO embeds: the assistant messages and observation texts, in order."""
    parts: list[str] = []
    for t in traj.turns:
        parts.append(t.assistant)
        if t.observation is not None and t.observation.text:
            parts.append(t.observation.text)
    return "\n".join(parts)


def documents_by_stem(docs: Sequence[Document]) -> dict[str, Document]:
    return {d.stem: d for d in docs}
