"""The parts of a recipe that are plain data: its roles, its reward spec, its export hints, its oracle style.

Exporters read the export hints from the run manifest (so a copied workspace exports the same without the
recipe's code); verl and EasyR1 read the reward name from each RL row's `extra_info`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal


# How a prompt names the coordinate convention of a box, per coordinate space. A recipe prompt writes
# "{coords}" where the words go; synthesis fills in the recipe's space, an export the target model family's.
COORD_WORDS: dict[str, str] = {
    "qwen2.5-vl": "pixel coordinates of that image",
    "raw": "pixel coordinates of that image",
    "qwen3-vl": "coordinates from 0 to 1000 relative to the page width and height",
    "norm1000": "coordinates from 0 to 1000 relative to the page width and height",
}


def coord_words(words: dict[str, str] | None, space: str) -> str:
    return (words or COORD_WORDS).get(space) or COORD_WORDS[space]


@dataclass(frozen=True)
class RoleSpec:
    """One model role the recipe calls: what it is for and whether the pipeline needs it."""

    name: str
    purpose: str
    required: bool = True


@dataclass(frozen=True)
class SftHints:
    """The paper's SFT hyper-parameters (written into the LLaMA-Factory yaml)."""

    cutoff_len: int
    learning_rate: float
    num_train_epochs: float
    gradient_accumulation_steps: int
    source: str = ""  # where the figures come from (paper table / appendix)


@dataclass(frozen=True)
class ExportHints:
    max_pixels: int  # page pixel budget of the training images
    data_source: str = "rag"  # verl `data_source` when the task's benchmark maps to nothing
    sft: SftHints | None = None  # None: the paper gives no SFT settings (the yaml says so and uses defaults)
    # how a box is worded per coordinate space ("{coords}" in the recipe's prompts); exports re-word the prompt
    # for the target model family so the words match the boxes in the record
    coord_words: dict[str, str] = field(default_factory=lambda: dict(COORD_WORDS))
    evidence_rows: bool = False  # the RL prompt is the one-turn evidence form EasyR1's EVisRAG rows expect

    def describe(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RewardSpec:
    """Which reward (a name registered in `vrag_data.rewards`) scores the recipe's episodes, and the RS-GRPO
    token scopes: action tag -> reward components ("other" = tokens outside any listed tag)."""

    name: str
    scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "scopes": {k: list(v) for k, v in self.scopes.items()}}


@dataclass(frozen=True)
class OracleSpec:
    """How the gold-guided oracle plays this recipe's policy turns.

    style "react": search until the gold pages were shown, select gold candidates when the environment
    lists candidates, crop the gold region when `crop_gold`, answer; "evidence": the one-turn
    observe/evidence/think/answer reply over the shown pages; "seeker": keyword search, read the gold
    pages, finish (an answer agent answers)."""

    style: Literal["react", "evidence", "seeker"] = "react"
    crop_gold: bool = True
