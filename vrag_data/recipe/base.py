"""The Recipe type: the complete, typed description of one paper's data pipeline, made of configured objects.

A recipe holds its action `Grammar`, prompts, context policy, environment settings (coordinate space, top-k,
document scope, re-prompts, max turns), the roles it calls (`RoleSpec`), its filter chain as configured
filter instances, its augmentations (`Augmentation` objects), its reward spec, its export hints and how the
oracle plays it. The generic episode loop (`vrag_data.synth.episode`) drives every recipe; a recipe changes
the loop only through the hooks below:

- `prepare(ep)`: before the first policy turn (a retrieval of the top-k pages, a planner),
- `refine(ep, action, text)`: after a policy reply is parsed, before the environment runs it (an expert
  re-locating a crop box),
- `after_step(ep, turn)`: after the environment ran a turn (a candidate-region step, a reader),
- `finish(ep)`: once the environment is done (an answer agent when the policy ran out of turns).

Options come from `synth.recipe_options.<recipe>` in the run config and are validated (unknown keys fail);
filter options from `filters.options.<filter>` (unknown keys fail). Recipes are registered by name in
`vrag_data.recipe.registry`; the library never looks a paper up by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vrag_data.augment.base import Augmentation
from vrag_data.config import ConfigError
from vrag_data.env import AppendOnly, ContextPolicy, EnvSettings
from vrag_data.env.geometry import QWEN_MIN_PIXELS, CoordSpace
from vrag_data.env.grammar import Grammar
from vrag_data.ids import short_hash
from vrag_data.recipe.spec import ExportHints, OracleSpec, RewardSpec, RoleSpec, coord_words
from vrag_data.schema.records import Action, Message, Task, Turn

if TYPE_CHECKING:  # the episode run is handed in at call time; no import cycle at runtime
    from vrag_data.synth.episode import EpisodeRun


class RecipeOptions(BaseModel):
    """Per-recipe knobs a run config may set (`synth.recipe_options.<recipe>`). None = the recipe's default."""

    model_config = ConfigDict(extra="forbid")
    top_k: int | None = Field(None, ge=1, le=20)  # pages per search
    coord_space: CoordSpace | None = None  # how the teacher writes boxes
    max_pixels: int | None = Field(None, ge=QWEN_MIN_PIXELS)  # page pixel budget sent to the teacher
    max_turns: int | None = Field(None, ge=1, le=64)  # overrides synth.max_turns for this recipe
    max_invalid: int | None = Field(None, ge=1)  # end an episode (status error) after this many invalid actions
    window: int = Field(2, ge=1)  # sliding-window context: turns kept in full
    grounding: bool = True  # a grounding expert re-locates every crop box (recipes that have one)
    grounding_fallback: bool = False  # keep the teacher's box when the grounding expert gives none (recorded)
    max_candidates: int = Field(12, ge=1, le=64)  # candidate-region step: regions drawn per selected page
    candidate_retries: int = Field(1, ge=0, le=5)  # candidate-region step: re-asks after an unusable reply
    scope: Literal["corpus", "document"] | None = None


def append_only(options: RecipeOptions) -> ContextPolicy:
    return AppendOnly()


def _errors(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in err.errors())


@dataclass(frozen=True)
class Recipe:
    name: str
    paper: str  # seed paper it follows
    grammar: Grammar
    system_prompt: str
    user_template: str  # "{question}" is filled in
    env: EnvSettings
    reward: RewardSpec
    export: ExportHints
    context: Callable[[RecipeOptions], ContextPolicy] = append_only
    roles: tuple[RoleSpec, ...] = (RoleSpec("policy", "takes the actions of an episode"),)
    filters: tuple[Any, ...] = ()  # configured filter instances, run in order
    augmentations: tuple[Augmentation, ...] = ()
    oracle: OracleSpec = field(default_factory=OracleSpec)
    options: RecipeOptions = field(default_factory=RecipeOptions)
    extra_prompts: Mapping[str, str] = field(default_factory=dict)  # role prompts (grounding, reader, planner, ...)

    # ------------------------------------------------------------------ configuration

    @property
    def max_pixels(self) -> int:
        return self.env.page_max_pixels

    @property
    def coord_space(self) -> str:
        return self.env.coord_space

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    def configure(self, options: Mapping[str, Any] | None = None, max_turns: int | None = None) -> "Recipe":
        """A copy with run-config options applied; a bad option fails with one line naming it."""
        try:
            opts = RecipeOptions.model_validate({**self.options.model_dump(exclude_unset=True), **(options or {})})
        except ValidationError as err:
            raise ConfigError(f"synth.recipe_options.{self.name}: {_errors(err)}") from None
        env_update: dict[str, Any] = {}
        for key, env_key in (("top_k", "top_k"), ("coord_space", "coord_space"), ("max_pixels", "page_max_pixels"),
                             ("max_invalid", "max_invalid"), ("scope", "scope")):
            if getattr(opts, key) is not None:
                env_update[env_key] = getattr(opts, key)
        turns = opts.max_turns or max_turns
        if turns is not None:
            env_update["max_turns"] = self.turns_for(turns)
        env = self.env.model_copy(update=env_update)
        try:
            EnvSettings.model_validate(env.model_dump())  # re-check bounds (e.g. top_k <= 20)
        except ValidationError as err:
            raise ConfigError(f"synth.recipe_options.{self.name}: {_errors(err)}") from None
        return dataclasses.replace(self, env=env, options=opts)

    def with_filter_options(self, chain: list[str] | None, options: Mapping[str, Mapping[str, Any]]) -> "Recipe":
        """A copy whose filter chain is `chain` (filter names; None = the recipe's own) with `options[filter]`
        applied over the recipe's settings. An unknown filter or option fails with one line."""
        from vrag_data.filters.registry import configure_filters

        return dataclasses.replace(self, filters=tuple(configure_filters(self.name, self.filters, chain, options)))

    def turns_for(self, max_turns: int) -> int:
        """Environment turns for a configured turn budget (a recipe may need extra internal steps)."""
        return max_turns

    def for_rl(self, max_turns: int, max_pixels: int, coord_space: str | None = None) -> "Recipe":
        """The recipe as the RL trainer rolls it out: pages at the model's pixel budget and boxes in the model
        family's coordinates (so its boxes refer to the image it was shown, in the words its prompt uses). A recipe
        that calls helper models during synthesis switches them off here."""
        return self.configure(self._rl_options(max_pixels, coord_space), max_turns)

    def _rl_options(self, max_pixels: int, coord_space: str | None) -> dict[str, Any]:
        return {"max_pixels": max_pixels, **({"coord_space": coord_space} if coord_space else {})}

    def context_policy(self) -> ContextPolicy:
        return self.context(self.options)

    def prompt_hash(self) -> str:
        return short_hash(self.name, self.system_prompt, self.user_template, self.env.prompts.model_dump(),
                          sorted(self.extra_prompts.items()))

    @property
    def system_text(self) -> str:
        """The system prompt with the coordinate words of the recipe's coordinate space filled in."""
        return self.system_prompt.replace("{coords}", coord_words(self.export.coord_words, self.coord_space))

    def initial_prompt(self, task: Task) -> list[Message]:
        msgs = [Message(role="system", text=self.system_text)] if self.system_prompt else []
        return [*msgs, Message(role="user", text=self.user_template.format(question=task.question.strip()))]

    def describe(self) -> dict[str, Any]:
        """What a run manifest records about the recipe: everything that changes what synthesis produces (the
        run id is derived from it) plus the hints the exporters read."""
        g = self.grammar
        return {
            "name": self.name, "paper": self.paper, "class": type(self).__qualname__,
            "grammar": {"name": g.name, "tags": sorted(g.tags), "actions": sorted(g.actions), "think_required": g.think_required,
                        "ordered": list(g.ordered), "keyword_search": g.keyword_search, "json": g.json},
            "context": self.context_policy().name, "coord_space": self.coord_space, "max_pixels": self.max_pixels,
            "top_k": self.env.top_k, "scope": self.env.scope, "max_turns": self.env.max_turns,
            "env": self.env.model_dump(mode="json", exclude={"prompts"}),
            "roles": [dataclasses.asdict(r) for r in self.roles],
            "filters": [f.name for f in self.filters],
            "filter_settings": {f.name: _settings(f) for f in self.filters},
            "augmentations": [a.name for a in self.augmentations],
            "reward": self.reward.describe(), "export": self.export.describe(),
            "oracle": dataclasses.asdict(self.oracle),
            "options": self.options.model_dump(), "prompt_hash": self.prompt_hash(),
        }

    def synth_key(self) -> str:
        """Hash of everything in the description that changes what synthesis produces (filters, augmentations
        and export hints act later and do not change the episodes)."""
        d = self.describe()
        for k in ("filters", "filter_settings", "augmentations", "export", "paper"):
            d.pop(k)
        return short_hash(d)

    # ------------------------------------------------------------------ hooks (default: plain ReAct loop)

    async def prepare(self, ep: "EpisodeRun") -> None:
        return None

    async def refine(self, ep: "EpisodeRun", action: Action, text: str) -> tuple[Action, str]:
        return action, text

    async def after_step(self, ep: "EpisodeRun", turn: Turn) -> None:
        return None

    async def finish(self, ep: "EpisodeRun") -> None:
        return None


def _settings(f: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(f):
        return {k: v for k, v in dataclasses.asdict(f).items() if k != "name"}
    return {}


def base_env(**kw: Any) -> EnvSettings:
    """Environment settings with the page budget every recipe shares (smart_resize at the recipe's budget,
    so the image the teacher gets is exactly the grid its pixel coordinates refer to)."""
    kw.setdefault("page_resize", "smart")
    kw.setdefault("page_min_pixels", QWEN_MIN_PIXELS)
    kw.setdefault("crop_margin", 0)  # a margin around crops is a recipe's choice (VISOR's 28 px), not a default
    return EnvSettings(**kw)
