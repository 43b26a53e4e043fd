"""VRAG-RL (seed 000): ReAct over page images with `<search>`, a crop action `<bbox>` and `<answer>`, plus
multi-expert sampling: after every crop the `grounding` role re-locates the box from the teacher's thought,
and its box replaces the teacher's (both are recorded in `extra["grounding"]`).

Faithful to the paper: the Figure 9 requirements (think first whenever new information arrives, search when
knowledge is missing, crop a returned image with `[x1, y1, x2, y2]`, search any number of times, a short
answer in `<answer>`), one page per search with per-trajectory de-duplication, the teacher and the
grounding expert both speak pixels of the page image they were shown (Qwen2.5-VL convention).

Where we differ, and why:
- The page budget is smart_resize at 401408 pixels (VRAG-RL's upper budget, 512*28*28) instead of its
  square-root budget resize: the image sent is then exactly the grid the teacher's pixel coordinates refer
  to, and exports re-materialise the same grid, so no box drifts between synthesis and training.
- The paper's prompt puts instruction and question together in one user turn; we keep the instruction as the
  system message (same content, clearer for SFT exports that store the system prompt apart).
- A grounding reply that cannot be read, or a failing grounding endpoint, ends the episode in error (a re-run
  retries it); only with `grounding_fallback: true` in the recipe options is the teacher's box kept instead, and
  each such turn is recorded in `extra["grounding"]` with `fallback: teacher_box`.
- `<region>` is accepted as a synonym of `<bbox>` (the paper's text uses both).
- Crops are shown and exported at no fewer than 256 x 28 x 28 pixels (VRAG-RL's minimum image budget), so a
  zoomed region carries as many visual tokens as the paper's; no margin is added around a crop (VISOR's 28 px is
  VISOR's).
- Balancing (steps 2-6 x action types): the paper gives no cap; each (steps, action types) bucket is capped at
  twice the median bucket size, so no kind of episode dominates and a rare bucket never shrinks the others.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING

from pipelines.base import ExportHints, ExtraKey, Recipe, RecipeOptions, RewardSpec, RoleSpec, SampleGate, SftHints, base_env, register_role
from vrag_data.env.geometry import VRAG_MIN_PIXELS
from vrag_data.env import EnvPrompts, parse_action
from vrag_data.env.grammar import REACT_CROP
from vrag_data.filters import Balance, Correctness, Dedup, Structure
from vrag_data.recipe import register
from vrag_data.schema.records import Action, ImageRef, Message
from vrag_data.teacher.pool import TeacherError

if TYPE_CHECKING:
    from vrag_data.recipe.episode_state import EpisodeState

SYSTEM = (
    "You answer questions using a search engine over a collection of document page images.\n"
    "Whenever you receive new information, first reason about it inside <think> and </think>.\n"
    "If, after reasoning, you still lack knowledge, query the search engine by writing <search> your query </search>; "
    "the user replies with the page image that was found.\n"
    "Each time a page image is returned you may zoom into one region of it for a sharper view by writing "
    "<bbox>[x1, y1, x2, y2]</bbox>, using {coords}.\n"
    "You may search as many times as you need.\n"
    "When no further information is needed, give the final answer inside <answer> and </answer> without any "
    "explanation, for example <answer> Paris </answer>."
)
USER = "Question: {question}"
INVALID = (
    "Your reply could not be used: {reason}. Reply again: reason inside <think>...</think>, then exactly one of "
    "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> or <answer>answer</answer>."
)
GROUNDING = (
    "You are a visual grounding expert. You get one document page image and the reasoning of an assistant who wants "
    "to zoom into part of this page. Find the one region of the page the assistant needs and give its bounding box "
    "as <bbox>[x1, y1, x2, y2]</bbox> in {space}. Reply with the box only."
)
GROUNDING_USER = "The assistant's reasoning: {thought}\nIt proposed the box {boxes}. Return the region it needs."
SPACE_WORDS = {
    "qwen2.5-vl": "pixel coordinates of this image",
    "raw": "pixel coordinates of this image",
    "qwen3-vl": "coordinates from 0 to 1000 relative to the image width and height",
    "norm1000": "coordinates from 0 to 1000 relative to the image width and height",
}
_BOX_TAG = re.compile(r"<(bbox|region)>(.*?)</\1>", re.S | re.I)
_FOUR = re.compile(r"(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)")


def parse_grounding(text: str) -> list[float] | None:
    """The first four comma-separated numbers of a grounding reply (`<bbox>[...]</bbox>`, `{"bbox_2d": [...]}`...)."""
    m = _FOUR.search(text or "")
    if not m:
        return None
    box = [float(v) for v in m.groups()]
    return box if box[2] > box[0] and box[3] > box[1] else None


def _fmt(box: list[float]) -> str:
    return json.dumps([int(v) if float(v).is_integer() else v for v in box])


class VragRlOptions(RecipeOptions):
    """VRAG-RL's knobs: the common ones plus its grounding expert."""

    grounding: bool = True  # the grounding expert re-locates every crop box
    grounding_fallback: bool = False  # keep the teacher's box when the grounding expert gives none (recorded)


@dataclasses.dataclass(frozen=True)
class VragRlRecipe(Recipe):
    OPTIONS = VragRlOptions

    def for_rl(self, max_turns: int, max_pixels: int, coord_space: str | None = None) -> Recipe:
        # the trained policy writes its own boxes: no grounding expert during RL rollouts
        return self.configure({**self._rl_options(max_turns, max_pixels, coord_space), "grounding": False})

    async def refine(self, ep: "EpisodeState", action: Action, text: str) -> tuple[Action, str]:
        if action.kind != "crop" or not self.options.grounding:
            return action, text
        page_id = action.page_ids[0] if action.page_ids else ep.env.state.current_page
        if page_id is None or page_id not in ep.pages:
            return action, text  # the environment rejects the crop with its own reason
        record = {"turn": ep.env.state.turn + 1, "page_id": page_id, "teacher_boxes": action.boxes}
        ep.scratch["grounding"] = {"page_id": page_id, "teacher_boxes": action.boxes}
        msgs = [
            Message(role="system", text=self.extra_prompts["grounding"].format(space=SPACE_WORDS.get(self.coord_space, "pixels"))),
            Message(role="user", text=GROUNDING_USER.format(thought=action.thought or "(none)", boxes=_fmt(action.boxes[0])),
                    images=[ImageRef(page_id=page_id)]),
        ]
        try:
            reply = await ep.ask("grounding", msgs, "grounding")
        except TeacherError as err:
            return self._without_grounding(ep, record, f"grounding failed: {err}", action, text)
        if reply.problem:  # truncated, undecodable or runaway: no box is read from it
            return self._without_grounding(ep, record, f"unusable grounding reply: {reply.problem}", action, text)
        box = parse_grounding(reply.text)
        if box is None:
            return self._without_grounding(ep, record, f"no box in the grounding reply {reply.text[:120]!r}", action, text)
        new_text = _BOX_TAG.sub(lambda m: f"<{m.group(1)}>{_fmt(box)}</{m.group(1)}>", text, count=1)
        new_action = parse_action(new_text, self.grammar)
        if new_action.kind != "crop":  # cannot happen for a text that parsed as a crop; keep the teacher's
            ep.note("grounding", {**record, "used": False, "reason": f"re-parse failed: {new_action.reason}"})
            return action, text
        ep.note("grounding", {**record, "grounding_boxes": [box], "used": True, "request_id": reply.request_id})
        return new_action, new_text

    def _without_grounding(self, ep: "EpisodeState", record: dict, why: str, action: Action, text: str) -> tuple[Action, str]:
        """The grounding expert gave no box. The episode ends in error (the role is part of the recipe) unless the
        run config asks for the teacher's box instead (`grounding_fallback: true`), which is recorded."""
        if not self.options.grounding_fallback:
            raise TeacherError(f"role grounding: {why}; fix roles.grounding, or set synth.recipe_options.{self.name}."
                               "grounding_fallback: true to keep the teacher's box")
        ep.note("grounding", {**record, "used": False, "fallback": "teacher_box", "reason": why})
        return action, text


GRAMMAR = dataclasses.replace(REACT_CROP, name="vrag_rl")
GROUNDING_ROLE = register_role(RoleSpec("grounding", "re-locates each crop box from the teacher's reasoning (multi-expert sampling)",
                                        vision=True))

RECIPE = register(VragRlRecipe(
    name="vrag_rl",
    paper="VRAG-RL (seed 000)",
    grammar=GRAMMAR,
    system_prompt=SYSTEM,
    user_template=USER,
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=401408, search_mode="first_unseen", top_k=1,
                 scope="corpus", max_turns=8, crop_min_pixels=VRAG_MIN_PIXELS, prompts=EnvPrompts(invalid=INVALID)),
    roles=(RoleSpec("policy", "the teacher that takes every action of an episode", vision=True),
           GROUNDING_ROLE,
           RoleSpec("judge", "decides whether the final answer matches the reference", required=False)),
    # correct teacher trajectories, well-formed, balanced by steps (2-6) and action types, de-duplicated
    filters=(Structure(), Correctness(), Balance(), Dedup()),
    reward=RewardSpec("vrag_rl", scopes={"search": ("ndcg", "format"), "bbox": ("ndcg", "format"),
                                         "answer": ("judge", "format"), "other": ("format",)}),
    export=ExportHints(max_pixels=401408, data_source="rag",
                       sft=SftHints(16384, 1.0e-5, 3.0, 2, "VRAG-RL Table 4"),
                       gate=SampleGate(requires=("search",), saw_pages=True)),  # answers from retrieved pages only
    options_model=VragRlOptions,
    extra_prompts={"grounding": GROUNDING},
    extra_keys=(ExtraKey("grounding", dict, "each crop the expert re-located, or why the teacher's box was kept", note=True),),
))
