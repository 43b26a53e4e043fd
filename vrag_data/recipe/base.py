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

Options come from `synth.recipe_options.<recipe>` in the run config and are validated against the recipe's own
options model (`options_model`, a `RecipeOptions` subclass with `extra="forbid"`: another recipe's option fails);
filter options from `filters.options.<recipe>.<filter>` (`vrag_data.filters.registry.configure_filters`). Recipes
are registered by name in `vrag_data.recipe.registry`; the library never looks a paper up by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vrag_data.augment.base import Augmentation
from vrag_data.config import ConfigError
from vrag_data.env import AppendOnly, ContextPolicy, EnvSettings
from vrag_data.env.geometry import QWEN_MIN_PIXELS, CoordSpace
from vrag_data.env.grammar import Grammar, describe_grammar
from vrag_data.filters.base import AnyFilter
from vrag_data.ids import short_hash
from vrag_data.recipe.episode_state import EpisodeState
from vrag_data.recipe.spec import ExportHints, OracleSpec, RewardSpec, RoleSpec, coord_words
from vrag_data.schema.extra_keys import ExtraKey, extra_problem
from vrag_data.schema.records import Action, Message, Task, Turn



# The one rule for a turn budget; RecipeOptions, the README and every run manifest (`Recipe.describe`) state it.
TURN_BUDGET_RULE = (
    "max_turns counts the policy's free turns; when they are used up without an answer and the recipe has a "
    "forced-answer prompt, the policy gets exactly one more (forced-answer) turn, and a forced turn that does not "
    "answer ends the episode with status 'budget'"
)


class RecipeOptions(BaseModel):
    """Knobs every recipe understands (`synth.recipe_options.<recipe>`); None = the recipe's own setting. A recipe
    with knobs of its own declares a subclass (its `options_model`), so another recipe's option fails.

    Turn budget: `max_turns` counts the policy's free turns; when they are used up without an answer and the recipe
    has a forced-answer prompt, the policy gets exactly one more (forced-answer) turn; a forced turn that does not
    answer ends the episode with status `budget`. Unset, the recipe's own budget applies (its `env.max_turns`);
    there is no global budget that overrides it.
    """

    model_config = ConfigDict(extra="forbid")
    top_k: int | None = Field(None, ge=1, le=20)  # pages per search
    coord_space: CoordSpace | None = None  # how the teacher writes boxes
    max_pixels: int | None = Field(None, ge=QWEN_MIN_PIXELS)  # page pixel budget sent to the teacher
    max_turns: int | None = Field(None, ge=1, le=64)  # the policy's free turns (see the class docstring)
    max_invalid: int | None = Field(None, ge=1)  # end an episode (status error) after this many invalid actions
    scope: Literal["corpus", "document"] | None = None


def append_only(options: RecipeOptions) -> ContextPolicy:
    return AppendOnly()


def _errors(err: ValidationError, model: type[BaseModel] | None = None) -> str:
    known = f" (known: {', '.join(model.model_fields)})" if model is not None else ""
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}{known if e['type'] == 'extra_forbidden' else ''}"
                     for e in err.errors())


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
    roles: tuple[RoleSpec, ...] = (RoleSpec("policy", "takes the actions of an episode", vision=True),)
    filters: tuple[AnyFilter, ...] = ()  # configured filter instances, run in order: the SFT data
    # the RL data's chain (which tasks become RL rows, in which order); empty = RL rows from the SFT-kept trajectories
    rl_filters: tuple[AnyFilter, ...] = ()
    augmentations: tuple[Augmentation, ...] = ()
    oracle: OracleSpec = field(default_factory=OracleSpec)
    options_model: type[RecipeOptions] = RecipeOptions  # the knobs this recipe understands (extra="forbid")
    options: RecipeOptions = field(default_factory=RecipeOptions)
    extra_prompts: Mapping[str, str] = field(default_factory=dict)  # role prompts (grounding, reader, planner, ...)
    # every key the recipe's hooks write into an episode's `extra`, typed (`vrag_data.schema.extra_keys`): what a
    # filter or the exporter reads back has one declaration, and an episode whose key holds another type ends in error
    extra_keys: tuple[ExtraKey, ...] = ()
    setup_steps: int = 0  # environment steps the recipe takes before the policy's first turn (a retrieval)

    # the options model this class's hooks read (`self.options.grounding`...): a subclass with knobs of its own binds
    # its model here, so a recipe built on it gets that model, and one built with an unrelated model fails at once
    OPTIONS: ClassVar[type[RecipeOptions]] = RecipeOptions

    def __post_init__(self) -> None:
        needed = type(self).OPTIONS
        if self.options_model is RecipeOptions and needed is not RecipeOptions:
            object.__setattr__(self, "options_model", needed)
        if not issubclass(self.options_model, needed):
            raise ConfigError(f"recipe {self.name}: {type(self).__name__} reads {needed.__name__} options but was built "
                              f"with options_model={self.options_model.__name__}; pass options_model={needed.__name__} "
                              "or a subclass of it")
        # the options object is always of the recipe's own model, so hooks read their knobs with defaults filled in
        if type(self.options) is not self.options_model:
            opts = self.options_model.model_validate(self.options.model_dump(exclude_unset=True))
            object.__setattr__(self, "options", opts)

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

    @property
    def free_turns(self) -> int:
        """The policy's free turns (the turn budget; `TURN_BUDGET_RULE`)."""
        return self.env.max_turns - self.setup_steps

    def configure(self, options: Mapping[str, Any] | None = None) -> "Recipe":
        """A copy with run-config options (`synth.recipe_options.<recipe>`) applied over the recipe's own; a bad
        option (unknown to this recipe's options model, or out of range) fails with one line naming it."""
        model = self.options_model
        try:
            opts = model.model_validate({**self.options.model_dump(exclude_unset=True), **(options or {})})
        except ValidationError as err:
            raise ConfigError(f"synth.recipe_options.{self.name}: {_errors(err, model)}") from None
        env_update: dict[str, Any] = {}
        for key, env_key in (("top_k", "top_k"), ("coord_space", "coord_space"), ("max_pixels", "page_max_pixels"),
                             ("max_invalid", "max_invalid"), ("scope", "scope")):
            if getattr(opts, key) is not None:
                env_update[env_key] = getattr(opts, key)
        if opts.max_turns is not None:  # free policy turns; the environment also counts the recipe's own steps
            env_update["max_turns"] = opts.max_turns + self.setup_steps
        env = self.env.model_copy(update=env_update)
        try:
            EnvSettings.model_validate(env.model_dump())  # re-check bounds (e.g. top_k <= 20)
        except ValidationError as err:
            raise ConfigError(f"synth.recipe_options.{self.name}: {_errors(err)}") from None
        return dataclasses.replace(self, env=env, options=opts)

    def with_filter_options(self, chain: Sequence[str] | None, options: Mapping[str, Mapping[str, Any]] | None,
                            rl_chain: Sequence[str] | None = None,
                            rl_options: Mapping[str, Mapping[str, Any]] | None = None) -> "Recipe":
        """A copy whose filter chain is `chain` (filter names, `filters.chains.<recipe>`; None = the recipe's own)
        with `options[filter]` (`filters.options.<recipe>`) applied over the recipe's settings, and the same for the
        RL chain (`filters.rl_chains`, `filters.rl_options`). An unknown filter, an unknown option, an option for a
        filter the chain does not run, or SFT/RL splits that disagree fail with one line."""
        from vrag_data.filters.curriculum import check_split
        from vrag_data.filters.registry import configure_filters

        sft = tuple(configure_filters(self.name, self.filters, chain, options))
        rl = tuple(configure_filters(self.name, self.rl_filters, rl_chain, rl_options, stage="rl"))
        check_split(self.name, sft, rl)
        return dataclasses.replace(self, filters=sft, rl_filters=rl)

    def for_rl(self, max_turns: int | None, max_pixels: int, coord_space: str | None = None) -> "Recipe":
        """The recipe as the RL trainer rolls it out: pages at the model's pixel budget and boxes in the model
        family's coordinates (so its boxes refer to the image it was shown, in the words its prompt uses), with
        `max_turns` free policy turns (`TURN_BUDGET_RULE`, as in synthesis; None: the recipe's own budget, the one its
        synthesis ran under and its export records). A recipe that calls helper models during synthesis switches them
        off here."""
        return self.configure(self._rl_options(max_turns, max_pixels, coord_space))

    def _rl_options(self, max_turns: int | None, max_pixels: int, coord_space: str | None) -> dict[str, Any]:
        return {**({"max_turns": max_turns} if max_turns is not None else {}), "max_pixels": max_pixels,
                **({"coord_space": coord_space} if coord_space else {})}

    def extra_problem(self, extra: Mapping[str, Any]) -> str:
        """The first declared key (the recipe's or the library's) whose value in an episode's `extra` has another
        shape, as one line; "" when none."""
        problem = extra_problem(self.extra_keys, extra)
        return f"recipe {self.name}: {problem}" if problem else ""

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
            "grammar": describe_grammar(g),
            "context": self.context_policy().name, "coord_space": self.coord_space, "max_pixels": self.max_pixels,
            "top_k": self.env.top_k, "scope": self.env.scope, "max_turns": self.free_turns,
            "turn_budget": {"free_turns": self.free_turns, "setup_steps": self.setup_steps,
                            "forced_answer_turn": bool(self.env.prompts.forced_answer), "rule": TURN_BUDGET_RULE},
            "env": self.env.model_dump(mode="json", exclude={"prompts"}),
            "roles": [r.describe() for r in self.roles],
            "filters": [f.name for f in self.filters],
            "filter_settings": {f.name: _settings(f) for f in self.filters},
            "rl_filters": [f.name for f in self.rl_filters],
            "rl_filter_settings": {f.name: _settings(f) for f in self.rl_filters},
            "augmentations": [a.name for a in self.augmentations],
            "reward": self.reward.describe(), "export": self.export.describe(),
            "oracle": dataclasses.asdict(self.oracle),
            "options": self.options.model_dump(), "prompt_hash": self.prompt_hash(),
        }

    def synth_key(self) -> str:
        """Hash of everything in the description that changes what synthesis produces (filters, augmentations
        and export hints act later and do not change the episodes)."""
        d = self.describe()
        for k in ("filters", "filter_settings", "rl_filters", "rl_filter_settings", "augmentations", "export", "paper"):
            d.pop(k)
        for r in d["roles"]:  # which roles are shown pages is checked before a run; it does not change an episode
            r.pop("vision", None)
        return short_hash(d)

    # ------------------------------------------------------------------ hooks (default: plain ReAct loop)

    async def prepare(self, ep: EpisodeState) -> None:
        return None

    async def refine(self, ep: EpisodeState, action: Action, text: str) -> tuple[Action, str]:
        return action, text

    async def after_step(self, ep: EpisodeState, turn: Turn) -> None:
        return None

    async def finish(self, ep: EpisodeState) -> None:
        return None


def _settings(f: object) -> dict[str, Any]:
    if dataclasses.is_dataclass(f):
        return {k: v for k, v in dataclasses.asdict(f).items() if k != "name"}
    return {}


def base_env(**kw: object) -> EnvSettings:
    """Environment settings with the page budget every recipe shares (smart_resize at the recipe's budget,
    so the image the teacher gets is exactly the grid its pixel coordinates refer to)."""
    kw.setdefault("page_resize", "smart")
    kw.setdefault("page_min_pixels", QWEN_MIN_PIXELS)
    kw.setdefault("crop_margin", 0)  # a margin around crops is a recipe's choice (VISOR's 28 px), not a default
    return EnvSettings(**kw)
