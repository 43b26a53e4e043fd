"""One RL episode of the policy model in the environment (the recipe decides prompts, settings, context)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vrag_data.env.actions import parse_action
from vrag_data.schema.records import Message, Observation, Trajectory, Turn
from vrag_data.train.rollout import ContextTooLong, PolicySampler, TurnSample


@dataclass
class Episode:
    trajectory: Trajectory
    samples: list[TurnSample]  # one per assistant turn, aligned with trajectory.turns


@dataclass
class RecipeBits:
    """What a rollout needs from a recipe: its grammar, env settings, first messages and context policy."""

    name: str
    grammar: str
    settings: Any  # vrag_data.env.settings.EnvSettings
    prompt: Callable[[Any], list[Message]]  # Task -> system + first user message
    context: Any  # object with build(prompt, turns, state) -> list[Message]


def run_episode(
    task: Any,
    bits: RecipeBits,
    make_env: Callable[[Any], Any],
    sampler: PolicySampler,
    max_turns: int,
    run_id: str,
    sample_idx: int,
    traj_id: str,
) -> Episode:
    from vrag_data.schema.records import Provenance

    env = make_env(task)
    prompt = bits.prompt(task)
    turns: list[Turn] = []
    samples: list[TurnSample] = []
    status, reason = "max_turns", ""
    for idx in range(max_turns):
        messages = bits.context.build(prompt, turns, env.state)
        try:
            sample = sampler.sample(messages)
        except ContextTooLong as err:
            status, reason = "error", str(err)
            break
        action = parse_action(sample.response_text, bits.grammar)
        result = env.step(action)
        obs: Observation | None = result.observation
        turns.append(Turn(idx=idx, assistant=sample.response_text, action=action, observation=obs))
        samples.append(sample)
        if result.done:
            status = "answered"
            break
    fields = env.state.trajectory_fields()
    if status == "error" or fields.get("status") in (None, "no_answer") and status != "answered":
        fields["status"] = status if status == "error" else fields.get("status") or "max_turns"
    if reason:
        fields["reason"] = reason
    traj = Trajectory(
        traj_id=traj_id,
        run_id=run_id,
        task_id=task.task_id,
        sample=sample_idx,
        recipe=bits.name,
        prompt=prompt,
        turns=turns,
        provenance=Provenance(recipe=bits.name, policy="model", models={"policy": "trainer"}),
        **fields,
    )
    return Episode(traj, samples)


def trajectory_text(traj: Trajectory) -> str:
    """What SPO embeds: the assistant messages and observation texts, in order."""
    parts: list[str] = []
    for t in traj.turns:
        parts.append(t.assistant)
        if t.observation is not None and t.observation.text:
            parts.append(t.observation.text)
    return "\n".join(parts)


def assistant_texts(episodes: Sequence[Episode]) -> list[str]:
    return [t.assistant for ep in episodes for t in ep.trajectory.turns]
