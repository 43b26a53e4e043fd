"""The generic episode loop: context policy -> policy role -> parse_action -> (recipe hook) -> env.step -> Turn.

One loop serves the five recipes; a recipe changes it through four hooks (`prepare`, `refine`, `after_step`,
`finish`; see `vrag_data.recipe.Recipe`). Every role is answered by a `Responder`: through the teacher pool
for OpenAI-compatible endpoints, or by the oracle policy (`vrag_data.synth.oracle`) when the role's kind is
"oracle". The loop never trusts model text: whatever the reply, `parse_action` yields an action (maybe
"invalid"), and the environment turns invalid actions into re-prompt observations, counted in the state.
A teacher call that fails for good (`TeacherError`, after the pool's bounded retries) ends the episode with
status "error" and the reason; the run goes on. Usage (requests, tokens, cache hits, retries) and latency
are recorded per turn and per episode.

Every episode ends within its budget whatever the models write: the environment allows `max_turns` free turns
and one forced-answer turn (see `vrag_data.env.environment`), and every call a recipe hook makes is bounded too:
at most `free_turns + 1` calls per phase (policy, grounding, reader, planner, answer agent, candidate step...)
per episode, counted in `extra["calls"]`. A hook that would go past it ends the episode with status "budget"
(hooks with retries ask `calls_left(phase)` first and stop on their own).

A reply can be unusable whatever it says: cut at max_tokens (`finish_reason: "length"`), holding bytes that are not
UTF-8, or longer than any message the grammar reads (`Reply.problem`, set by the teacher's `Responder`; the pool keeps
only the start of such a runaway reply). On the policy role such a reply is an invalid action with that reason
(`EpisodeRun.action_of`); the recipe's hooks treat it as they treat an unparseable reply of their role. With
`EpisodeDeps.hide_rejected` (synthesis) a rejected reply is never sent again: later requests carry a short
placeholder in its place (`EpisodeRun.replayed`). `EpisodeDeps.max_request_bytes` bounds the
message text (images excluded) an episode sends, summed over its requests; the call that would pass it ends the
episode with status "budget".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from vrag_data.env import ContextPolicy, EnvSettings, Environment, parse_action
from vrag_data.inert import sanitize_text
from vrag_data.env.actions import invalid
from vrag_data.env.grammar import Grammar
from vrag_data.ids import traj_id
from vrag_data.retrieve.base import Searcher
from vrag_data.schema.records import (
    Action,
    Document,
    LayoutBlock,
    Message,
    Observation,
    Page,
    Provenance,
    Task,
    Trajectory,
    Turn,
    Usage,
    utcnow,
)
from vrag_data.store.workspace import Workspace
from vrag_data.teacher.pool import ChatResult, TeacherError, TeacherPool

if TYPE_CHECKING:
    from vrag_data.recipe.spec import OracleSpec


class RecipeLike(Protocol):
    """What the loop needs from a recipe (`vrag_data.recipe.Recipe` is the implementation)."""

    name: str
    grammar: Grammar
    oracle: OracleSpec
    env: EnvSettings
    extra_prompts: Mapping[str, str]

    @property
    def max_pixels(self) -> int: ...

    @property
    def coord_space(self) -> str: ...

    @property
    def free_turns(self) -> int: ...

    def context_policy(self) -> ContextPolicy: ...

    def initial_prompt(self, task: Task) -> list[Message]: ...

    def prompt_hash(self) -> str: ...

    async def prepare(self, ep: "EpisodeRun") -> None: ...

    async def refine(self, ep: "EpisodeRun", action: Action, text: str) -> tuple[Action, str]: ...

    async def after_step(self, ep: "EpisodeRun", turn: Turn) -> None: ...

    async def finish(self, ep: "EpisodeRun") -> None: ...


@dataclass(frozen=True)
class Reply:
    text: str
    request_id: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    retries: int = 0
    oracle: bool = False
    problem: str = ""  # why the reply is unusable whatever it says (truncated, undecodable, too long); "" = usable


REJECTED_PLACEHOLDER = "[reply rejected: {reason}]"  # what later requests carry instead of a rejected reply


def chat_reply(res: ChatResult) -> Reply:
    """The loop's view of a teacher pool answer (a cache hit included: the flags are stored with the reply), as the
    pool's one door (`vrag_data.teacher.accept`) passed it: normalised text, and why it is unusable."""
    return Reply(res.text, res.request_id, res.prompt_tokens, res.completion_tokens, res.latency_s, res.cached,
                 res.retries, problem=res.problem)


def rejected_placeholder(reason: str) -> str:
    """The short text that stands for a rejected reply in later requests (under 200 characters)."""
    reason = " ".join(reason.split())
    return REJECTED_PLACEHOLDER.format(reason=reason if len(reason) <= 150 else reason[:149] + "…")


def text_bytes(messages: list[Message]) -> int:
    """The message text of a request in UTF-8 bytes (images are not counted)."""
    return sum(len(m.text.encode("utf-8", "replace")) for m in messages)


OracleFn = Callable[[str, str, "EpisodeRun"], str]  # (role, phase, episode) -> reply text


class Responder:
    """Answers a role: the teacher pool for kind "openai", the oracle for kind "oracle"."""

    def __init__(self, pool: TeacherPool | None, oracle: OracleFn | None, image_loader: Callable[..., bytes] | None) -> None:
        self.pool, self.oracle, self.loader = pool, oracle, image_loader

    def kind(self, role: str) -> str:
        return self.pool.kind(role) if self.pool is not None else ("oracle" if self.oracle else "missing")

    async def ask(self, role: str, messages: list[Message], ep: "EpisodeRun", phase: str) -> Reply:
        kind = self.kind(role)
        if kind == "oracle":
            if self.oracle is None:
                raise TeacherError(f"role {role} is set to the oracle but no oracle policy was given")
            return Reply(self.oracle(role, phase, ep), oracle=True)
        if kind != "openai" or self.pool is None:
            raise TeacherError(f"role {role} has no endpoint (kind {kind}); configure roles.{role}")
        # the episode's calls share their growing prefix: keep them on one replica (prefix cache), see teacher/routing.py
        res = await self.pool.chat(role, messages, sample=ep.sample, image_loader=self.loader,
                                   affinity=f"{ep.task.task_id}:{ep.sample}")
        return chat_reply(res)


class BudgetSpent(Exception):
    """A phase asked for more model calls than the episode's budget allows (ends the episode with status "budget")."""


@dataclass
class EpisodeDeps:
    """What every episode of a run shares."""

    ws: Workspace
    run_id: str
    recipe: RecipeLike
    searcher: Searcher
    pages: Mapping[str, Page]
    layout: Mapping[str, list[LayoutBlock]]
    documents: Mapping[str, Document]  # by stem
    responder: Responder
    provenance: Provenance
    # synthesis: a rejected reply is replaced by a placeholder in later requests (see the module doc);
    # the trainer's rollouts keep it (one token stream per episode)
    hide_rejected: bool = False
    max_request_bytes: int | None = None  # message text sent per episode, summed over requests; None = no bound


@dataclass
class EpisodeRun:
    """One (task, sample) rollout in progress; recipes and the oracle read and extend it."""

    deps: EpisodeDeps
    task: Task
    sample: int
    env: Environment = field(init=False)
    context: ContextPolicy = field(init=False)
    prompt: list[Message] = field(init=False)
    turns: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    extra: dict[str, Any] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)  # per-episode working memory (oracle, recipes)
    error: str = ""
    calls: dict[str, int] = field(default_factory=dict)  # model calls so far, per phase (the oracle's included)
    request_bytes: int = 0  # message text sent to endpoints so far (see `text_bytes`)
    _pending_ids: list[str] = field(default_factory=list)
    _pending_latency: float = 0.0

    def __post_init__(self) -> None:
        r = self.deps.recipe
        self.env = Environment(self.task, self.deps.searcher, self.deps.pages, self.deps.layout, r.env)
        self.context = r.context_policy()
        self.prompt = r.initial_prompt(self.task)
        self.extra["coord_space"] = r.coord_space
        self.extra["coord_max_pixels"] = r.max_pixels

    @property
    def recipe(self) -> RecipeLike:
        return self.deps.recipe

    @property
    def pages(self) -> Mapping[str, Page]:
        return self.deps.pages

    @property
    def layout(self) -> Mapping[str, list[LayoutBlock]]:
        return self.deps.layout

    def messages(self) -> list[Message]:
        """The next policy request: the context policy over the turns so far (rejected replies replayed as placeholders)."""
        turns = [self._as_replayed(t) for t in self.turns] if self.deps.hide_rejected else self.turns
        return self.context.build(self.prompt, turns, self.env.state)

    def _as_replayed(self, turn: Turn) -> Turn:
        text = self.replayed(turn.assistant, turn.action)
        return turn if text is turn.assistant else turn.model_copy(update={"assistant": text})

    def action_of(self, reply: Reply, grammar: Grammar | None = None) -> Action:
        """The action a reply holds under `grammar` (default: the recipe's); an unusable reply is an invalid action."""
        return invalid(reply.problem) if reply.problem else parse_action(reply.text, grammar or self.recipe.grammar)

    def replayed(self, text: str, action: Action) -> str:
        """What later requests carry for an assistant reply: the reply, or with `hide_rejected` a short placeholder
        when the reply itself was rejected (`action` is invalid: unparseable, truncated, undecodable, too long). A
        well-formed action the environment refused (a repeated search, an index out of range) stays as written, so
        the model sees what it did. What goes back is the allowlist's rendering with the grammar's tags live (an
        entity, a look-alike or foreign tag the reply wrote is inert in the history), identical for a clean reply."""
        if action.kind != "invalid" or not self.deps.hide_rejected:
            clean = sanitize_text(text, allowed=self.recipe.grammar.tags)
            return text if clean == text else clean
        return rejected_placeholder(action.reason or "malformed action")

    @property
    def call_budget(self) -> int:
        """Calls one phase may make per episode: one per free policy turn plus the forced-answer turn (the recipe's
        own setup steps, e.g. a retrieval before the first turn, make no model call)."""
        return self.recipe.free_turns + 1

    def calls_left(self, phase: str) -> int:
        return max(0, self.call_budget - self.calls.get(phase, 0))

    async def ask(self, role: str, messages: list[Message], phase: str) -> Reply:
        """One call of a role; its usage is counted and its request id goes with the next recorded turn.
        Raises `BudgetSpent` when `phase` has used its calls (see the module docstring)."""
        if not self.calls_left(phase):
            raise BudgetSpent(f"phase {phase} (role {role}) asked for more than its {self.call_budget} model calls in this episode")
        self._spend_request_bytes(role, messages)
        self.calls[phase] = self.calls.get(phase, 0) + 1
        reply = await self.deps.responder.ask(role, messages, self, phase)
        if reply.problem:
            self.note("rejected_replies", {"role": role, "phase": phase, "reason": reply.problem, "request_id": reply.request_id})
        if not reply.oracle:
            u = self.usage
            u.requests += 1
            u.cache_hits += int(reply.cached)
            u.retries += reply.retries
            u.prompt_tokens += reply.prompt_tokens
            u.completion_tokens += reply.completion_tokens
        if reply.request_id:
            self._pending_ids.append(reply.request_id)
        self._pending_latency += reply.latency_s
        return reply

    def _spend_request_bytes(self, role: str, messages: list[Message]) -> None:
        """Count the message text a call to an endpoint sends; raises `BudgetSpent` when it would pass the bound."""
        if self.deps.responder.kind(role) == "oracle":
            return
        n = self.request_bytes + text_bytes(messages)
        cap = self.deps.max_request_bytes
        if cap is not None and n > cap:
            raise BudgetSpent(f"request bytes cap: the {role} call would bring the message text this episode sent to {n:,} "
                              f"bytes, over the cap of {cap:,} (synth.max_episode_request_bytes)")
        self.request_bytes = n

    def step(self, text: str, action: Action, role: str = "policy") -> Turn:
        """Run `action` in the environment and record the turn (with the requests made since the last turn)."""
        res = self.env.step(action)
        return self.record(text, action, res.observation, role)

    def record(self, text: str, action: Action, observation: Observation | None, role: str = "policy", idx: int | None = None) -> Turn:
        turn = Turn(idx=self.env.state.turn if idx is None else idx, assistant=text, action=action, observation=observation,
                    role=role, request_ids=list(self._pending_ids), latency_s=self._pending_latency)
        self._pending_ids.clear()
        self._pending_latency = 0.0
        self.turns.append(turn)
        return turn

    def note(self, key: str, value: object) -> None:
        """Append `value` to the list `extra[key]` (recipe records: grounding, candidates, oracle steps...)."""
        self.extra.setdefault(key, []).append(value)

    def trajectory(self, t0: float) -> Trajectory:
        deps, st = self.deps, self.env.state
        fields = st.trajectory_fields()
        extra = {**fields.pop("extra"), **self.extra, "calls": dict(self.calls), "request_bytes": self.request_bytes}
        # a key the recipe declares (or the library reads) holding another type: an error, never exported as it is
        error = self.error or self.recipe.extra_problem(extra)
        if error:
            fields["status"], fields["reason"] = "error", error
        return Trajectory(
            traj_id=traj_id(deps.run_id, self.task.task_id, self.sample), run_id=deps.run_id, task_id=self.task.task_id,
            sample=self.sample, recipe=self.recipe.name, prompt=self.prompt, turns=self.turns, usage=self.usage,
            latency_s=time.perf_counter() - t0, provenance=deps.provenance, extra=extra, finished_at=utcnow(), **fields,
        )


async def run_episode(deps: EpisodeDeps, task: Task, sample: int) -> Trajectory:
    """Roll out one (task, sample) with the recipe of `deps`; never raises for model or endpoint faults."""
    t0 = time.perf_counter()
    ep = EpisodeRun(deps, task, sample)
    recipe = deps.recipe
    try:
        await recipe.prepare(ep)
        while not ep.env.state.done and not ep.error:
            reply = await ep.ask("policy", ep.messages(), "policy")
            action = ep.action_of(reply)
            action, text = await recipe.refine(ep, action, reply.text)
            turn = ep.step(text, action)
            await recipe.after_step(ep, turn)
        if not ep.error:
            await recipe.finish(ep)
    except TeacherError as err:
        ep.error = " ".join(str(err).split())[:500]
    except BudgetSpent as err:
        st = ep.env.state
        st.done, st.status, st.reason = True, "budget", str(err)
    return ep.trajectory(t0)


def make_episode(deps: EpisodeDeps) -> Callable[[Task, int], Any]:
    """The `episode(task, sample)` coroutine factory `run_episodes` expects."""

    async def episode(task: Task, sample: int) -> Trajectory:
        return await run_episode(deps, task, sample)

    return episode
