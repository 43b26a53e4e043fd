"""Each recipe's export hints, from what the export was given: the run manifest (what the run was made with),
else the resolved `Recipe` objects its caller passed. The export never looks a recipe up by name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from vrag_data.config import ExportConfig
from vrag_data.env.grammar import describe_grammar
from vrag_data.errors import VragError
from vrag_data.export.rl import data_source_for
from vrag_data.store.run import RunDir

if TYPE_CHECKING:
    from vrag_data.recipe.base import Recipe


def recipe_hints(recipe: "Recipe") -> dict[str, Any]:
    """The hints the exporters read, in the shape a run manifest records them."""
    return {**recipe.export.describe(), "reward": recipe.reward.name, "crop_min_pixels": recipe.env.crop_min_pixels,
            "grammar": describe_grammar(recipe.grammar), "coord_space": recipe.coord_space,
            "max_turns": recipe.free_turns}  # the policy's free turns (TURN_BUDGET_RULE): RL rollouts default to it


class RecipeHints:
    """recipe name -> its export hints; a recipe neither the manifest describes nor the caller passed stops the
    export with one line."""

    def __init__(self, run: RunDir, cfg: ExportConfig, recipes: Sequence["Recipe"] = ()) -> None:
        self.cfg = cfg
        self.run_path = run.path
        self.by_recipe: dict[str, dict[str, Any]] = {r.name: recipe_hints(r) for r in recipes}
        m = run.manifest()
        described = (m.config.get("recipe") or {}) if m is not None else {}
        if m is not None and isinstance(described.get("export"), dict):
            # what the run was made with wins over the recipe as it is configured now
            own = self.by_recipe.get(m.recipe, {})
            self.by_recipe[m.recipe] = {**described["export"], "reward": (described.get("reward") or {}).get("name"),
                                        "crop_min_pixels": (described.get("env") or {}).get("crop_min_pixels"),
                                        "grammar": described.get("grammar") or own.get("grammar"),
                                        "coord_space": described.get("coord_space") or own.get("coord_space"),
                                        # the free turns the run's episodes had (`Recipe.describe`'s max_turns)
                                        "max_turns": described.get("max_turns", own.get("max_turns"))}
            if "gate" not in described["export"] and "gate" in own:
                # a run made before recipes declared their gate: the recipe's gate as resolved now (recorded)
                self.by_recipe[m.recipe]["gate"] = {**own["gate"], "from": "the recipe as resolved now"}
            if "not_for" not in described["export"] and "not_for" in own:
                # which trainers' loops can run the recipe is the recipe's, not the run's: a run made before recipes
                # declared it gets the recipe's word as resolved now
                self.by_recipe[m.recipe]["not_for"] = own["not_for"]

    def __call__(self, recipe: str) -> dict[str, Any]:
        hints = self.by_recipe.get(recipe)
        if hints is None:
            known = ", ".join(sorted(self.by_recipe)) or "none"
            raise VragError(f"{self.run_path}: export hints of recipe {recipe!r} unknown (the run manifest does not "
                            f"describe it and the caller passed {known}); pass the resolved recipe to export_run(recipes=...)")
        return hints

    def crop_min_pixels(self, recipe: str) -> int | None:
        v = self(recipe).get("crop_min_pixels")
        return int(v) if v else None

    def coord_words(self, recipe: str) -> dict[str, str]:
        return dict(self(recipe).get("coord_words") or {})

    def max_pixels(self, recipe: str) -> int:
        return int(self.cfg.max_pixels.get(recipe) or self(recipe)["max_pixels"])

    def data_source(self, recipe: str, benchmark: str) -> str:
        default = self.cfg.data_source_default or self(recipe).get("data_source") or "rag"
        return data_source_for(benchmark, self.cfg.data_source_map, default)

    def gate(self, recipe: str) -> dict[str, Any]:
        """The recipe's training-sample gate (`SampleGate.describe()`), its grammar and coordinate space."""
        h = self(recipe)
        return {"gate": h.get("gate"), "grammar": h.get("grammar"), "coord_space": h.get("coord_space")}


def refuse_target(hints: Callable[[str], dict[str, Any]], recipes: Iterable[str], target: str | None) -> None:
    """One line naming the first recipe whose own hints say the trainer `target` (an `export --for` value) cannot run
    its loop, why, and what to export instead; nothing when no target was asked for or every recipe allows it."""
    if not target:
        return
    for recipe in sorted(set(recipes)):
        why = (hints(recipe).get("not_for") or {}).get(target)
        if why:
            raise VragError(f"{recipe}: not exported --for {target}: {why}")
