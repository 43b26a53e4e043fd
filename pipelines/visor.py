"""VISOR (seed 002): search / crop / answer with an evidence space, a sliding window of W=2 turns, intent
injection, crop evaluation and correction prompts, a verification hint, a no-image prompt and a forced
answer at the turn limit; top-1 search with per-trajectory de-duplication; crops expanded by 28 px and
clamped (the environment's crop geometry).

The context is rebuilt every turn by `vrag_data.env.VisorContext`: the question and the evidence space
(every note the agent wrote in <think> right after seeing a page, keyed by page) stay pinned at the top,
then only the last W turns follow, each observation restating the question (intent injection) and carrying
the event's prompt (crop evaluation after a page, crop correction after a crop, verification hint when the
agent said it is verifying, no-image prompt when every result was already shown, forced answer on the last
turn). The stored trajectory keeps the plain observations; only the request differs.

Where we differ, and why:
- The system prompt asks for a verification search before answering, as the paper's does, but the
  environment does not enforce it; the oracle does not verify either. The paper adds the verification
  round to SFT data by augmentation, which `vrag-data filter` applies (`TeacherVerification`: the teacher
  writes the verification reasoning from a random unseen page of the same document), together with the
  replacement of every search query by the original question; the augmented trajectory replaces its source.
- Retrieval is BM25 by default (ColQwen2.5 in the paper) and the page budget is smart_resize at 401408
  pixels, so pixel boxes refer to exactly the image that was sent and exported.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from pipelines.base import ExportHints, Recipe, RecipeOptions, RewardSpec, RoleSpec, SampleGate, SftHints, base_env
from vrag_data.augment.visor import TeacherVerification
from vrag_data.env.geometry import VRAG_MIN_PIXELS
from vrag_data.env import ContextPolicy, EnvPrompts, VisorContext
from vrag_data.env.grammar import THINK_FIRST_CROP
from vrag_data.filters import Correctness, Dedup, RetrievalCompleteness, Structure
from vrag_data.recipe import register

SYSTEM = (
    "You are an agent that answers a question by exploring a collection of document page images.\n"
    "Every reply must start with your reasoning inside <think> and </think>, followed by exactly one action:\n"
    "- <search>query</search> retrieves one new page image you have not seen yet;\n"
    "- <bbox>[x1, y1, x2, y2]</bbox> zooms into a region of the page you just received ({coords}), "
    "only when a detail is too small or unclear to read;\n"
    "- <answer>answer</answer> gives the final answer, short and without explanation.\n"
    "Whenever you receive a page, write down in <think> everything on it that might help with the question, even if "
    "the page alone is not enough: these notes are kept as your evidence and shown to you again later.\n"
    "Before committing to an answer, run one last search to verify your evidence."
)
USER = "Question: {question}"
INVALID = (
    "That reply was not valid: {reason}. Use this format: <think>your reasoning</think> followed by exactly one of "
    "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> or <answer>answer</answer>."
)


class VisorOptions(RecipeOptions):
    """VISOR's knobs: the common ones plus the sliding window."""

    window: int = Field(2, ge=1)  # sliding-window context: turns kept in full (the paper's W=2)


@dataclasses.dataclass(frozen=True)
class VisorRecipe(Recipe):
    OPTIONS = VisorOptions  # the context policy and the environment carry everything else VISOR adds


def evidence_window(options: VisorOptions) -> ContextPolicy:
    return VisorContext(window=options.window)


GRAMMAR = dataclasses.replace(THINK_FIRST_CROP, name="visor")

RECIPE = register(VisorRecipe(
    name="visor",
    paper="VISOR (seed 002)",
    grammar=GRAMMAR,
    system_prompt=SYSTEM,
    user_template=USER,
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=401408, search_mode="first_unseen", top_k=1,
                 dedup=True, scope="corpus", crop_margin=28, max_turns=10, crop_min_pixels=VRAG_MIN_PIXELS,
                 prompts=EnvPrompts(invalid=INVALID)),
    context=evidence_window,
    options_model=VisorOptions,
    roles=(RoleSpec("policy", "the teacher that takes every action of an episode", vision=True),
           RoleSpec("judge", "decides whether the final answer matches the reference", required=False)),
    # crop immediately after a retrieval, no trivial full-image crop (>= 99 % of the page once the margin is
    # added, i.e. a box written as [0, 0, 1000, 1000] or close), <= 10 retrievals; completeness; correctness
    filters=(Structure(adjacent=True, max_retrievals=10, max_crop_area=0.99), RetrievalCompleteness(), Correctness(), Dedup()),
    augmentations=(TeacherVerification(),),  # replaces its source in the SFT data
    # the format term is a penalty (1 = bad), so the scopes use the answer and retrieval rewards only
    reward=RewardSpec("visor", scopes={"search": ("retrieval",), "bbox": ("answer",), "answer": ("answer",),
                                       "other": ("answer", "retrieval")}),
    export=ExportHints(max_pixels=401408, data_source="rag", sft=SftHints(16384, 1.0e-5, 3.0, 2, "VISOR Table 5"),
                       gate=SampleGate(requires=("search",), saw_pages=True)),  # answers from retrieved pages only
))
