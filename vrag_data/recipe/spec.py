"""The parts of a recipe that are plain data: its roles, its reward spec, its export hints, its oracle style.

Exporters read the export hints from the run manifest (so a copied workspace exports the same without the
recipe's code); verl and EasyR1 read the reward name from each RL row's `extra_info`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from vrag_data.schema.extra_keys import ExtraKey  # noqa: F401  (re-exported: a recipe declares its extra keys)
from vrag_data.schema.roles import RoleSpec  # noqa: F401  (re-exported: a recipe lists its roles)


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
class SftHints:
    """The paper's SFT hyper-parameters (written into the LLaMA-Factory yaml)."""

    cutoff_len: int
    learning_rate: float
    num_train_epochs: float
    gradient_accumulation_steps: int
    source: str = ""  # where the figures come from (paper table / appendix)


# What a training sample may never hold, whatever the recipe: the defaults of `SampleGate.max_chars`
DEFAULT_MAX_CHARS: dict[str, int] = {"answer": 1000, "evidence_line": 1000, "observe": 4000, "thought": 8000, "query": 2000}


@dataclass(frozen=True)
class SampleGate:
    """What the recipe declares a training sample must be; `vrag-data export` checks every SFT record and RL row
    against it (`vrag_data.export.gate`) and writes none that fails. Always checked, whatever the recipe: each
    assistant turn that is a training target parses under the recipe's grammar and was accepted by the environment
    (not truncated, not off-format), no text holds a control character other than newline and tab, every box lies
    inside the page it refers to. The recipe adds:

    - `trains_retries`: the paper trains on a rejected attempt followed by the environment's error prompt (none of
      the five seed papers does; False rejects a record holding one),
    - `requires`: action kinds that must have run successfully (an observation that is not an error) before the
      answer, e.g. ("search", "read") for a seeker that gathers information first,
    - `saw_pages`: the episode was shown at least one retrieved page,
    - `max_assistant_turns`: the most assistant turns one record may hold (1: a single reply),
    - `max_chars`: the longest answer, evidence line, observation, thought and query a target may hold,
    - `evidence_per_image`: every target writes one evidence line per image its record shows, in order (EVisRAG scores
      evidence per image: a line for an image never shown is phantom evidence),
    - `prompt_tags`: tags the recipe's own prompts hold besides its grammar's (its system and user messages are checked
      by the allowlist with these allowed; a tag from outside text is inert in any case)."""

    trains_retries: bool = False
    requires: tuple[str, ...] = ()
    saw_pages: bool = False
    max_assistant_turns: int | None = None
    max_chars: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_CHARS))
    evidence_per_image: bool = False
    prompt_tags: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "requires": list(self.requires), "prompt_tags": list(self.prompt_tags)}

    @classmethod
    def from_description(cls, d: dict[str, Any] | None) -> "SampleGate":
        d = dict(d or {})
        return cls(trains_retries=bool(d.get("trains_retries", False)), requires=tuple(d.get("requires") or ()),
                   saw_pages=bool(d.get("saw_pages", False)), max_assistant_turns=d.get("max_assistant_turns"),
                   max_chars={**DEFAULT_MAX_CHARS, **(d.get("max_chars") or {})},
                   evidence_per_image=bool(d.get("evidence_per_image", False)), prompt_tags=tuple(d.get("prompt_tags") or ()))


@dataclass(frozen=True)
class ExportHints:
    max_pixels: int  # page pixel budget of the training images
    data_source: str = "rag"  # verl `data_source` when the task's benchmark maps to nothing
    sft: SftHints | None = None  # None: the paper gives no SFT settings (the yaml says so and uses defaults)
    # how a box is worded per coordinate space ("{coords}" in the recipe's prompts); exports re-word the prompt
    # for the target model family so the words match the boxes in the record
    coord_words: dict[str, str] = field(default_factory=lambda: dict(COORD_WORDS))
    evidence_rows: bool = False  # the RL prompt is the one-turn evidence form EasyR1's EVisRAG rows expect
    gate: SampleGate = field(default_factory=SampleGate)  # what a training sample must be (checked by export)
    # trainers (`export --for` targets) whose rollout loop cannot run this recipe's episodes -> why, and what to export
    # instead (one clause each): such an export is refused with that line, never written for a loop that cannot
    # answer it
    not_for: dict[str, str] = field(default_factory=dict)

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
