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
  round to SFT data by augmentation, which `vrag-data filter` applies (`visor_augment`), together with
  the replacement of every search query by the original question.
- Retrieval is BM25 by default (ColQwen2.5 in the paper) and the page budget is smart_resize at 401408
  pixels, so pixel boxes refer to exactly the image that was sent and exported.
"""

from __future__ import annotations

import dataclasses

from pipelines.base import Recipe, base_env
from vrag_data.env import EnvPrompts

SYSTEM = (
    "You are an agent that answers a question by exploring a collection of document page images.\n"
    "Every reply must start with your reasoning inside <think> and </think>, followed by exactly one action:\n"
    "- <search>query</search> retrieves one new page image you have not seen yet;\n"
    "- <bbox>[x1, y1, x2, y2]</bbox> zooms into a region of the page you just received (pixel coordinates of that image), "
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


@dataclasses.dataclass(frozen=True)
class VisorRecipe(Recipe):
    pass  # the context policy and the environment carry everything VISOR adds


RECIPE = VisorRecipe(
    name="visor",
    paper="VISOR (seed 002)",
    grammar="visor",
    system_prompt=SYSTEM,
    user_template=USER,
    env=base_env(grammar="visor", coord_space="qwen2.5-vl", page_max_pixels=401408, search_mode="first_unseen", top_k=1,
                 dedup=True, scope="corpus", crop_margin=28, max_turns=10, prompts=EnvPrompts(invalid=INVALID)),
    context="visor",
    roles=("policy", "judge"),
    filters=("structure", "retrieval_completeness", "correctness", "dedup"),
    augmentations=("visor_query_rewrite+verification",),
    reward="visor",
    export={"formats": ["llamafactory", "verl", "hf"], "max_pixels": 401408, "data_source": "rag"},
)
