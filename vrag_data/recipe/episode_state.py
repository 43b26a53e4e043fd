"""What a recipe's hooks see of an episode in progress. The episode loop (`vrag_data.synth.episode.EpisodeRun`)
hands one in; the protocol lives with the recipe type so that the recipe layer never imports the stage that runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from vrag_data.env.environment import Environment
from vrag_data.env.grammar import Grammar
from vrag_data.schema.records import Action, LayoutBlock, Message, Observation, Page, Task, Turn


class ReplyLike(Protocol):
    """A role's reply as a recipe reads it (`vrag_data.synth.episode.Reply`)."""

    text: str
    request_id: str
    problem: str  # why the reply is unusable whatever it says; "" = usable


class EpisodeState(Protocol):
    task: Task
    sample: int
    env: Environment  # the episode's environment (its state: `env.state`)
    deps: Any  # the episode's dependencies (searcher, pages, layout, roles)
    prompt: list[Message]
    turns: list[Turn]
    extra: dict[str, Any]  # stored with the trajectory
    scratch: dict[str, Any]  # per-episode working memory, not stored

    @property
    def pages(self) -> Mapping[str, Page]: ...

    @property
    def layout(self) -> Mapping[str, list[LayoutBlock]]: ...

    def messages(self) -> list[Message]: ...

    def action_of(self, reply: ReplyLike, grammar: Grammar | None = None) -> Action: ...

    def replayed(self, text: str, action: Action) -> str: ...

    def calls_left(self, phase: str) -> int: ...

    async def ask(self, role: str, messages: list[Message], phase: str) -> ReplyLike: ...

    def step(self, text: str, action: Action, role: str = "policy") -> Turn: ...

    def record(self, text: str, action: Action, observation: Observation | None, role: str = "policy",
               idx: int | None = None) -> Turn: ...

    def note(self, key: str, value: object) -> None: ...
