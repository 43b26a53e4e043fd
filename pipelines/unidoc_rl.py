"""UniDoc-RL (seed 001): search -> select -> bbox. A search returns several candidate pages, `<select>` keeps
the relevant ones, `<bbox>` zooms into a region of the selected page, `<answer>` ends.

Trajectory synthesis (paper A.2): after the teacher selects a page, the page's layout blocks are drawn on it
with index labels and the teacher decides whether a closer look is needed and which candidate region holds
the critical detail; the chosen block becomes the crop action of the trajectory (the teacher's own
reasoning, the block's box in 0-1000 coordinates, Qwen3-VL's convention). The teacher may instead write a
`<bbox>`; it is matched to the blocks by IoU (snapped to the block when IoU >= 0.5, else kept as written).
Every candidate step is recorded in `extra["candidates"]` (order shown, choice, how it was matched).

Where we differ, and why:
- Candidate boxes come from the workspace's layout blocks (PyMuPDF's layout model by default; MinerU when
  ingested with `--layout mineru`), the same role MinerU plays in the paper.
- The candidate order is a balanced permutation (a seeded shuffle rotated by the sample index and the step),
  so over n samples every block is shown at every position equally often: the teacher's choice cannot
  lean on position. The paper does not say how it orders candidates.
- At most `max_candidates` blocks (largest first, page headers/footers left out) are drawn, to keep labels
  legible; a block thinner than the environment's minimum crop (28 px a side) is never offered, since the crop
  it would become is rejected; "0" means no crop is needed, so the teacher can skip the crop as in the paper's case 2.
- The labelled image is sent only in that side request; the stored trajectory shows the plain page, which
  is what the student will see.

Filtering (A.3): the SFT chain keeps well-formed, correct trajectories of tasks the intermediate SFT model (the
student, running this recipe's own loop greedily) answers wrong. The RL chain curates the RL data separately: the
student runs 5 rollouts per task at temperature 1.0 (the paper says "high" without a value), each with its own
searches; a task is kept when some rollout retrieved every gold page yet answered wrong. Tasks whose trajectories the
quality filters (structure, correctness) all rejected come first in the RL rows.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import Field

from pipelines.base import ExportHints, ExtraKey, OracleSpec, Recipe, RecipeOptions, RewardSpec, RoleSpec, SampleGate, SftHints, base_env
from vrag_data.env import EnvPrompts, render_action, sanitize_text
from vrag_data.env.geometry import box_to_model, crop_box, iou
from vrag_data.env.settings import EnvSettings
from vrag_data.env.grammar import REACT_SELECT_CROP
from vrag_data.filters import Correctness, Dedup, Difficulty, RlOrder, Structure
from vrag_data.recipe import register
from vrag_data.ids import short_hash
from vrag_data.schema.records import Action, LayoutBlock, Message, Turn
from vrag_data.synth.annotate import LabelledRef

if TYPE_CHECKING:
    from vrag_data.recipe.episode_state import EpisodeState

SYSTEM = (
    "You answer questions over a collection of document page images, step by step.\n"
    "Start every reply by reasoning inside <think> and </think>, then take exactly one action:\n"
    "- <search>query</search> asks the search engine; it returns several candidate page images, numbered from 1.\n"
    "- <select>[i, j]</select> keeps only the candidates that are really relevant to the question, by their numbers.\n"
    "- <bbox>[x1, y1, x2, y2]</bbox> zooms into a region of the page you selected last, with {coords}; use it only when "
    "a detail is too small to read.\n"
    "- <answer>answer</answer> gives the final answer, short and without explanation.\n"
    "Search again whenever the selected pages do not hold what you need."
)
USER = "Question: {question}"
INVALID = (
    "Your reply could not be used: {reason}. Reply again with <think>...</think> followed by exactly one of "
    "<search>, <select>, <bbox> or <answer>."
)
CANDIDATES_PROMPT = "The search returned these candidate pages:\n{listing}\nSelect the relevant ones by their numbers."
CANDIDATE_STEP = (
    "This is the page you selected, with {n} candidate regions outlined and numbered:\n{listing}\n"
    "Decide whether you need a closer look at one region to answer the question: {question}\n"
    "Reason inside <think>...</think>, then write <select>[i]</select> with the number of the region that holds the "
    "critical detail you cannot read clearly on the whole page, or <select>[0]</select> if the page is legible "
    "enough and no zoom is needed."
)
SKIP_CLASSES = {"header", "footer"}


def balanced_order(n: int, slot: int, seed: str) -> list[int]:
    """A permutation of range(n): one seeded shuffle, rotated by `slot`. Over slots 0..n-1 every item takes
    every position exactly once (a Latin square), so no item is favoured by position."""
    base = list(range(n))
    random.Random(int(short_hash(seed), 16)).shuffle(base)
    k = slot % n if n else 0
    return base[k:] + base[:k]


def croppable(block: LayoutBlock, page_size: tuple[int, int], env: EnvSettings) -> bool:
    """Whether the block is at least `env.min_crop` raw pixels (28 by default) on each side, and so is the crop it
    becomes after the round trip through the model's coordinates (the environment's own check): a thinner block
    would be offered to the teacher, chosen, and then rejected as a degenerate crop."""
    x1, y1, x2, y2 = block.bbox.raw
    if x2 - x1 < env.min_crop or y2 - y1 < env.min_crop:  # the block itself, before any rounding of coordinates
        return False
    rule = env.resize_rule()
    box = box_to_model(block.bbox, env.coord_space, page_size, rule)
    display = rule.display_size(*page_size) if env.coord_space == "qwen2.5-vl" else None
    return crop_box([float(v) for v in box], env.coord_space, page_size, display, env.crop_margin, env.min_crop).ok


def candidate_blocks(blocks: list[LayoutBlock], limit: int,
                     fits: Callable[[LayoutBlock], bool] | None = None) -> list[LayoutBlock]:
    """At most `limit` blocks (largest first, headers/footers and blocks `fits` rejects left out), in reading order."""
    usable = [b for b in blocks if b.cls not in SKIP_CLASSES and b.bbox.raw[2] > b.bbox.raw[0] and b.bbox.raw[3] > b.bbox.raw[1]
              and (fits is None or fits(b))]
    usable.sort(key=lambda b: -((b.bbox.raw[2] - b.bbox.raw[0]) * (b.bbox.raw[3] - b.bbox.raw[1])))
    return sorted(usable[:limit], key=lambda b: (b.bbox.raw[1], b.bbox.raw[0]))  # reading order before permuting


def _listing(blocks: list[LayoutBlock]) -> str:
    # block text is document text (text layer, OCR, table cells): defanged like every observation
    return "\n".join(f"[{i}] {b.cls}: {sanitize_text(' '.join(b.text.split())[:60]) or '(no text)'}" for i, b in enumerate(blocks, 1))


class UniDocOptions(RecipeOptions):
    """UniDoc-RL's knobs: the common ones plus its candidate-region step."""

    max_candidates: int = Field(12, ge=1, le=64)  # regions drawn per selected page
    candidate_retries: int = Field(1, ge=0, le=5)  # re-asks after an unusable reply


@dataclasses.dataclass(frozen=True)
class UniDocRecipe(Recipe):
    OPTIONS = UniDocOptions

    async def after_step(self, ep: "EpisodeState", turn: Turn) -> None:
        st = ep.env.state
        if turn.action.kind != "select" or turn.observation is None or turn.observation.kind != "select" or st.done or st.forced:
            return  # no turn left for a crop: the teacher must answer now
        page_id = st.current_page
        if page_id is None:
            return
        page = ep.pages[page_id]
        blocks = candidate_blocks(list(ep.layout.get(page_id, [])), self.options.max_candidates,
                                  fits=lambda b: croppable(b, (page.width, page.height), self.env))
        step = len(ep.extra.get("candidates", []))
        record: dict = {"turn": turn.idx, "page_id": page_id}
        if not blocks:
            ep.note("candidates", {**record, "choice": None, "how": "no layout blocks on the page"})
            return
        order = balanced_order(len(blocks), ep.sample + step, f"{ep.task.task_id}|{page_id}")
        shown = [blocks[i] for i in order]
        record["order"] = [b.block_id for b in shown]
        ep.scratch["candidates"] = {"page_id": page_id, "boxes": [b.bbox for b in shown], "classes": [b.cls for b in shown]}
        text = self.extra_prompts["candidates"].format(n=len(shown), listing=_listing(shown), question=ep.task.question.strip())
        msgs = [*ep.messages(), Message(role="user", text=text, images=[LabelledRef(page_id=page_id, labels=[b.bbox for b in shown])])]
        chosen, thought, how = None, "", ""
        for attempt in range(self.options.candidate_retries + 1):
            if not ep.calls_left("candidates"):  # the episode's bound on candidate-step calls: no crop this time
                how = "the candidate step's call budget is spent"
                break
            reply = await ep.ask("policy", msgs, "candidates")
            action = ep.action_of(reply, self.grammar)  # a reply cut at max_tokens, undecodable or runaway is invalid
            chosen, thought, how, problem = self._choice(action, shown, ep, page_id)
            if not problem:
                break
            st.n_invalid += 1  # counted with the run's invalid actions
            st.invalid_reasons.append(f"candidate step: {problem}")
            msgs = [*msgs, Message(role="assistant", text=ep.replayed(reply.text, action)),
                    Message(role="user", text=self.env.prompts.invalid.format(reason=problem))]
            how = f"unusable reply ({problem})"
        ep.note("candidates", {**record, "choice": None if chosen is None else (chosen if isinstance(chosen, str) else "box"), "how": how})
        if chosen is None or st.done:
            return
        if isinstance(chosen, str):  # a block id
            block = next(b for b in shown if b.block_id == chosen)
            box = [float(v) for v in box_to_model(block.bbox, self.coord_space, (page.width, page.height), self.env.resize_rule())]
        else:
            box = chosen
        crop = Action(kind="crop", thought=thought or "A closer view of this region shows the detail I need.", boxes=[box])
        ep.step(render_action(crop, self.grammar), crop)

    def _choice(self, a: Action, shown: list[LayoutBlock], ep: "EpisodeState", page_id: str) -> tuple[object, str, str, str]:
        """(block id | model box | None, thought, how, problem) for the action of a candidate-step reply."""
        if a.kind == "select":
            if a.indices == [0]:
                return None, a.thought, "no crop needed", ""
            if len(a.indices) != 1 or not 1 <= a.indices[0] <= len(shown):
                return None, a.thought, "", f"choose one region number between 1 and {len(shown)}, or 0 for no zoom"
            return shown[a.indices[0] - 1].block_id, a.thought, "index", ""
        if a.kind == "crop" and len(a.boxes) == 1:
            page = ep.pages[page_id]
            from vrag_data.env.geometry import to_raw

            display = self.env.resize_rule().display_size(page.width, page.height)
            raw = to_raw(a.boxes[0], self.coord_space, (page.width, page.height), display)
            scores = [iou(raw, b.bbox.raw) for b in shown]
            best = max(range(len(shown)), key=lambda k: scores[k])
            if scores[best] >= 0.5:
                return shown[best].block_id, a.thought, f"box matched to region {best + 1} (IoU {scores[best]:.2f})", ""
            return a.boxes[0], a.thought, f"own box (best IoU {scores[best]:.2f})", ""
        return None, "", "", a.reason or "reply with <select>[i]</select>"


GRAMMAR = dataclasses.replace(REACT_SELECT_CROP, name="unidoc_rl")

RECIPE = register(UniDocRecipe(
    name="unidoc_rl",
    paper="UniDoc-RL (seed 001)",
    grammar=GRAMMAR,
    system_prompt=SYSTEM,
    user_template=USER,
    env=base_env(coord_space="qwen3-vl", page_max_pixels=1003520, search_mode="candidates", top_k=5,
                 scope="corpus", select_base=1, max_turns=8, prompts=EnvPrompts(invalid=INVALID, candidates=CANDIDATES_PROMPT)),
    roles=(RoleSpec("policy", "the teacher: searches, selects candidates, picks the region to crop, answers", vision=True),
           RoleSpec("judge", "decides whether the final answer matches the reference", required=False),
           RoleSpec("student", "the model to be trained, whose wrong answers mark the hard tasks", required=False, vision=True)),
    # A.3: quality (correct), then difficulty-aware (every student attempt wrong)
    filters=(Structure(), Correctness(), Difficulty(rule="all_wrong", samples=1, temperature=0.0), Dedup()),
    # A.3 RL curation: retrieved the gold pages yet answered wrong in >= 1 of 5 rollouts; quality-rejected tasks first
    rl_filters=(Difficulty(rule="retrieved_but_wrong", samples=5, temperature=1.0), RlOrder(first="quality_rejected")),
    reward=RewardSpec("unidoc_rl", scopes={"search": ("ndcg", "format"), "select": ("select", "format"),
                                           "bbox": ("crop", "format"), "answer": ("judge", "format"), "other": ("format",)}),
    export=ExportHints(max_pixels=200704, data_source="rag", sft=SftHints(40000, 1.0e-5, 3.0, 2, "UniDoc-RL appendix"),
                       gate=SampleGate(requires=("search",), saw_pages=True)),  # answers from retrieved pages only
    oracle=OracleSpec(style="react", crop_gold=False),  # the crop comes from the candidate-region step
    options_model=UniDocOptions,
    extra_prompts={"candidates": CANDIDATE_STEP},
    extra_keys=(ExtraKey("candidates", dict, "each candidate-region step: the regions shown, the choice, how it matched",
                         note=True),),
))
