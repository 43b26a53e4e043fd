"""The reward registry: every reward is a `Reward` object registered under its name (the name a recipe's
`RewardSpec` and an exported row's `extra_info.reward` give).

A reward is one module: a `Reward` subclass (its weights, knobs, whether its answer term is a judge's verdict, its
format check, its score) and one `register_reward(...)` line. Found by the one discovery rule (`vrag_data.plugins`):
a module of `vrag_data/rewards/kinds/` holding that line, or one an installed package announces under the entry-point
group `vrag_data.rewards` (a module whose import registers it, or a `Reward` subclass). A reward module that is to
travel in an export's reward bundle imports only the standard library and `vrag_data.rewards` / `vrag_data.env`
modules the bundle carries (`vrag_data.export.reward_bundle`). Standard library only: the bundle carries this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from vrag_data.plugins import Registry
from vrag_data.rewards.answer import answer_correct

if TYPE_CHECKING:
    from vrag_data.rewards.episode import Episode, Gold

ENTRY_POINT_GROUP = "vrag_data.rewards"
# What each reward component reads from a trainer's row (`extra_info` of a verl / HF / EasyR1 RL row) besides the
# rollout text and the ground truth. A reward needs the keys of its components (`Reward.row_keys`): a row without one
# is refused by `vrag_data.rewards.verl.compute_score` instead of scored with a default. Present but empty is valid
# (`search_results: []`: the rollout recorded no search). Components not listed read nothing else.
COMPONENT_ROW_KEYS: dict[str, tuple[str, ...]] = {
    "ndcg": ("gold_pages", "search_results"),  # the pages retrieved, per search, against the gold pages
    "retrieval": ("gold_pages", "search_results"),  # VISOR: the search that first completed retrieval
    "answer": ("gold_pages", "search_results"),  # VISOR: the honesty gate asks whether retrieval was complete
    "select": ("gold_pages", "selections"),
    "crop": ("gold_boxes", "coord_space"),  # <bbox> boxes of the text are read in the row's coordinate space
    "recall": ("gold_pages", "read_pages"),  # MM-Doc-R1: the pages the read tool opened
}


@dataclass
class RewardBreakdown:
    recipe: str
    components: dict[str, float]
    weights: dict[str, float]
    total: float
    gated: bool = False  # True when a gate (format / retrieval) overrode the weighted sum
    extras: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        """Flat scalars with "score" first, the shape verl's reward manager accepts."""
        return {"score": self.total, **self.components, **self.extras, "gated": float(self.gated)}


class Reward:
    """One reward: `weights` name its components (the keys of `score`'s breakdown) with their default weights;
    `params` its other knobs; `judged`: its answer term is a judge's verdict (a model judge in the papers, the rule
    scorers when asked); `honesty_gate`: an incomplete retrieval is scored by the honesty judge instead (VISOR)."""

    name: ClassVar[str]
    weights: ClassVar[Mapping[str, float]]
    params: ClassVar[Mapping[str, float]] = {}
    judged: ClassVar[bool] = False
    honesty_gate: ClassVar[bool] = False
    extra_row_keys: ClassVar[tuple[str, ...]] = ()  # row keys beyond those of its components

    def format_score(self, texts: Sequence[str]) -> float:
        """The reward's format score in [0, 1] over the assistant texts of an episode."""
        raise NotImplementedError

    def score(self, ep: Episode, gold: Gold, w: dict[str, float], p: dict[str, float],
              judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        """All components and the total, with the resolved weights `w` and knobs `p`."""
        raise NotImplementedError

    def row_keys(self) -> tuple[str, ...]:
        """The row keys this reward reads (its components' `COMPONENT_ROW_KEYS`), in a stable order."""
        keys = (k for comp in self.weights for k in COMPONENT_ROW_KEYS.get(comp, ()))
        return tuple(dict.fromkeys((*keys, *self.extra_row_keys)))

    def resolve_weights(self, weights: Mapping[str, float] | None = None) -> dict[str, float]:
        out = dict(self.weights)
        for k, v in (weights or {}).items():
            if k not in out:
                raise ValueError(f"{self.name}: unknown reward weight {k!r}; known: {sorted(out)}")
            out[k] = float(v)
        return out

    def resolve_params(self, params: Mapping[str, float] | None = None) -> dict[str, float]:
        return {**self.params, **(params or {})}


def _check(reward: Reward, others: dict[str, Reward]) -> None:
    if not isinstance(getattr(reward, "weights", None), Mapping) or not reward.weights:
        raise ValueError(f"register reward: {type(reward).__name__} needs a `name` and non-empty `weights`")


# the shipped rewards: the modules of `kinds/` holding a `register_reward(...)` line (in the reward bundle, the modules of
# the rewards its rows name); `__package__` keeps the bundle's renamed copy pointing at its own folder
REWARDS: Registry[Reward] = Registry.of_class("reward", ENTRY_POINT_GROUP, Reward, check=_check, call="register_reward",
                                              folder=f"{__package__}.kinds")


def register_reward(reward: Reward | type[Reward]) -> Reward:
    """Register `reward` (an instance or a subclass) under its `name`; a name taken by another reward is refused."""
    return REWARDS.register(reward)


def known_rewards() -> tuple[str, ...]:
    return REWARDS.names()


def get_reward(name: str) -> Reward:
    """The registered reward `name`; an unknown name is one line naming the known ones."""
    return REWARDS.get(name)


def judge_or_rules(ep: Episode, gold: Gold, judge_score: float | None) -> float:
    """The answer term of a judged reward: the judge's verdict, else the rule scorer (`answer_correct`)."""
    if judge_score is not None:
        return float(judge_score)
    return answer_correct(ep.final_answer, gold.answer, gold.answer_format)


def weighted(comps: Mapping[str, float], w: Mapping[str, float]) -> float:
    return sum(w[k] * comps[k] for k in w)
