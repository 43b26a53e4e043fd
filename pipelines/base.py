"""The Recipe type: everything that makes one seed paper's data pipeline, as data plus a few hooks.

A recipe names its action grammar, prompts, context policy, environment settings (coordinate space, top-k,
document scope, re-prompts, max turns), the teacher roles it calls, its default filter chain, its
augmentations, its reward spec and export hints. The generic episode loop (`vrag_data.synth.episode`)
drives every recipe; a recipe changes the loop only through the hooks below:

- `prepare(ep)`: before the first policy turn (EVisRAG's retrieval of the top-k pages, MM-Doc-R1's planner),
- `refine(ep, action, text)`: after a policy reply is parsed, before the environment runs it (VRAG-RL's
  grounding expert re-locating a crop box),
- `after_step(ep, turn)`: after the environment ran a turn (UniDoc-RL's layout-candidate step after a
  selection, MM-Doc-R1's reader and answer agent),
- `finish(ep)`: once the environment is done (MM-Doc-R1's answer agent when the seeker ran out of turns).

Options come from `synth.recipe_options.<recipe>` in the run config and are validated (unknown keys fail).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vrag_data.config import ConfigError
from vrag_data.env import AppendOnly, ContextPolicy, EnvSettings, VisorContext
from vrag_data.env.geometry import QWEN_MIN_PIXELS, CoordSpace
from vrag_data.ids import short_hash
from vrag_data.schema.records import Action, Message, Task, Turn

if TYPE_CHECKING:  # the episode run is handed in at call time; no import cycle at runtime
    from vrag_data.synth.episode import EpisodeRun


class RecipeOptions(BaseModel):
    """Per-recipe knobs a run config may set (`synth.recipe_options.<recipe>`). None = the recipe's default."""

    model_config = ConfigDict(extra="forbid")
    top_k: int | None = Field(None, ge=1, le=20)  # pages per search (EVisRAG: 1-5)
    coord_space: CoordSpace | None = None  # how the teacher writes boxes
    max_pixels: int | None = Field(None, ge=QWEN_MIN_PIXELS)  # page pixel budget sent to the teacher
    max_turns: int | None = Field(None, ge=1, le=64)  # overrides synth.max_turns for this recipe
    max_invalid: int | None = Field(None, ge=1)  # end an episode (status error) after this many invalid actions
    window: int = Field(2, ge=1)  # VISOR sliding window W
    grounding: bool = True  # VRAG-RL: the grounding expert re-locates every crop box
    max_candidates: int = Field(12, ge=1, le=64)  # UniDoc-RL: layout candidates drawn per selected page
    candidate_retries: int = Field(1, ge=0, le=5)  # UniDoc-RL: re-asks after an unusable candidate reply
    scope: Literal["corpus", "document"] | None = None


ContextName = Literal["append_only", "visor"]


@dataclass(frozen=True)
class Recipe:
    name: str
    paper: str  # seed paper it follows
    grammar: str
    system_prompt: str
    user_template: str  # "{question}" is filled in
    env: EnvSettings
    context: ContextName = "append_only"
    roles: tuple[str, ...] = ("policy",)
    filters: tuple[str, ...] = ()
    augmentations: tuple[str, ...] = ()
    reward: str = ""
    export: dict[str, Any] = field(default_factory=dict)
    options: RecipeOptions = field(default_factory=RecipeOptions)
    extra_prompts: dict[str, str] = field(default_factory=dict)  # role prompts (grounding, reader, planner, ...)

    # ------------------------------------------------------------------ configuration

    @property
    def max_pixels(self) -> int:
        return self.env.page_max_pixels

    @property
    def coord_space(self) -> str:
        return self.env.coord_space

    def configure(self, options: dict[str, Any] | None = None, max_turns: int | None = None) -> "Recipe":
        """A copy with run-config options applied; a bad option fails with one line naming it."""
        try:
            opts = RecipeOptions.model_validate({**self.options.model_dump(exclude_unset=True), **(options or {})})
        except ValidationError as err:
            bad = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in err.errors())
            raise ConfigError(f"synth.recipe_options.{self.name}: {bad}") from None
        env_update: dict[str, Any] = {}
        if opts.top_k is not None:
            env_update["top_k"] = opts.top_k
        if opts.coord_space is not None:
            env_update["coord_space"] = opts.coord_space
        if opts.max_pixels is not None:
            env_update["page_max_pixels"] = opts.max_pixels
        turns = opts.max_turns or max_turns
        if turns is not None:
            env_update["max_turns"] = self.turns_for(turns)
        if opts.max_invalid is not None:
            env_update["max_invalid"] = opts.max_invalid
        if opts.scope is not None:
            env_update["scope"] = opts.scope
        env = self.env.model_copy(update=env_update)
        EnvSettings.model_validate(env.model_dump())  # re-check bounds (e.g. top_k <= 20)
        return dataclasses.replace(self, env=env, options=opts)

    def turns_for(self, max_turns: int) -> int:
        """Environment turns for a configured turn budget (a recipe may need extra internal steps)."""
        return max_turns

    def context_policy(self) -> ContextPolicy:
        if self.context == "visor":
            return VisorContext(window=self.options.window)
        return AppendOnly()

    def prompt_hash(self) -> str:
        return short_hash(self.name, self.system_prompt, self.user_template, self.env.prompts.model_dump(),
                          sorted(self.extra_prompts.items()))

    def initial_prompt(self, task: Task) -> list[Message]:
        msgs = [Message(role="system", text=self.system_prompt)] if self.system_prompt else []
        return [*msgs, Message(role="user", text=self.user_template.format(question=task.question.strip()))]

    def describe(self) -> dict[str, Any]:
        """What a run manifest records about the recipe."""
        return {
            "name": self.name, "paper": self.paper, "grammar": self.grammar, "context": self.context,
            "coord_space": self.coord_space, "max_pixels": self.max_pixels, "top_k": self.env.top_k,
            "scope": self.env.scope, "max_turns": self.env.max_turns, "roles": list(self.roles),
            "filters": list(self.filters), "augmentations": list(self.augmentations), "reward": self.reward,
            "options": self.options.model_dump(), "prompt_hash": self.prompt_hash(),
        }

    # ------------------------------------------------------------------ hooks (default: plain ReAct loop)

    async def prepare(self, ep: "EpisodeRun") -> None:
        return None

    async def refine(self, ep: "EpisodeRun", action: Action, text: str) -> tuple[Action, str]:
        return action, text

    async def after_step(self, ep: "EpisodeRun", turn: Turn) -> None:
        return None

    async def finish(self, ep: "EpisodeRun") -> None:
        return None


def base_env(**kw: Any) -> EnvSettings:
    """Environment settings with the page budget every recipe shares (smart_resize at the recipe's budget,
    so the image the teacher gets is exactly the grid its pixel coordinates refer to)."""
    kw.setdefault("page_resize", "smart")
    kw.setdefault("page_min_pixels", QWEN_MIN_PIXELS)
    return EnvSettings(**kw)
