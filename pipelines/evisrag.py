"""EVisRAG / VisRAG 2.0 (seed 003): one turn over the top-k retrieved pages (k = 1-5, default 3). The model
writes `<observe>` (what each image holds with respect to the question), `<evidence>` with one line per
image, `[i]: ...` or `[i]: no relevant information`, `<think>` (reasoning over the evidence) and
`<answer>`; "insufficient to answer" when the images do not hold all the evidence.

The pages are retrieved by the environment's own search with the question (scope, de-duplication and the
page table apply), before the single turn; they go with the user message as images 1..k. The sufficiency
label (every gold evidence page among the shown pages) is recorded in `extra["sufficient"]`, with
`extra["shown_pages"]`, `extra["top_k"]` and `extra["ranked_pages"]` (the search ranking, which the
top-1..5 augmentation of `vrag-data filter` re-uses).

Where we differ, and why:
- Retrieval is the workspace index (BM25 by default; VisRAG-Ret in the paper).
- A reply that breaks the format gets the re-prompt and another attempt (`max_turns` free attempts, default 2,
  then the forced-answer one: 3 in all) instead of being dropped, so format failures are counted like every
  recipe's invalid actions.
- Tasks without gold evidence pages (unanswerable) are labelled insufficient.

Data split and curriculum (paper Sec. 4 / App. A.2): the tasks are cut 8:2 into an SFT part and an RL (GRPO) part by a
hash of the task id (`TaskSplit`; a task is in one part only). The SFT chain keeps the teacher's correct
trajectories of the SFT part. The RL chain takes the RL part, lets the student (the SFT model, running this recipe's
one-turn prompt) answer each task 8 times at temperature 1.0, drops the tasks it always gets right, and orders the
rest simple -> complex by the student's accuracy (most often right first). The paper's 400 extra MMLongBench
multi-hop tasks are data, not a rule: import them as tasks of the run.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pydantic import Field

from pipelines.base import ExportHints, ExtraKey, OracleSpec, Recipe, RecipeOptions, RewardSpec, RoleSpec, SampleGate, SftHints, base_env
from vrag_data.augment.evisrag import TeacherTopKVariants
from vrag_data.env import EnvPrompts
from vrag_data.env.grammar import OBSERVE_EVIDENCE_ANSWER
from vrag_data.filters import Correctness, Dedup, Difficulty, RlOrder, TaskSplit
from vrag_data.recipe import register
from vrag_data.schema.extra_keys import SHOWN_PAGES, SUFFICIENT
from vrag_data.schema.records import Action, Message, Task

if TYPE_CHECKING:
    from vrag_data.recipe.episode_state import EpisodeState

INSTRUCTION = (
    "You are a visual question-answering assistant. Below are a question and {k} numbered image(s) of document pages. "
    "Work in four steps.\n"
    "1. Observe: think about what kind of page could hold the answer, then look at each image in turn with the question "
    "in mind and note whether it holds anything relevant. Put this inside <observe></observe>.\n"
    "2. Evidence: inside <evidence></evidence>, write one line per image, in order: \"[i]: \" followed by what "
    "image i shows that bears on the question, or \"[i]: no relevant information\" when you are sure image i has nothing useful.\n"
    "3. Reason: inside <think></think>, work out the answer step by step from the evidence you recorded.\n"
    "4. Answer: inside <answer></answer>, give only the final answer, based only on the evidence in the images, with "
    "nothing extra (for a yes/no question, just yes or no). If the images do not hold enough information, write "
    "<answer>insufficient to answer</answer>.\n"
    "Use exactly these four tags, once each, in this order. Any number of images, including none, may be relevant.\n"
    "Question: {question}"
)
INVALID = (
    "Your reply did not follow the format: {reason}. Write <observe>...</observe>, <evidence> with one [i]: line per "
    "image </evidence>, <think>...</think> and <answer>...</answer>, each exactly once and in this order."
)


class EvisragOptions(RecipeOptions):
    """EVisRAG's knobs: the common ones, with the paper's range of shown pages."""

    top_k: int | None = Field(None, ge=1, le=5)  # EVisRAG shows 1 to 5 pages


@dataclasses.dataclass(frozen=True)
class EvisragRecipe(Recipe):
    OPTIONS = EvisragOptions

    def initial_prompt(self, task: Task) -> list[Message]:
        return [Message(role="user", text=INSTRUCTION.format(k=self.env.top_k, question=task.question.strip()))]

    async def prepare(self, ep: "EpisodeState") -> None:
        st = ep.env.state
        res = ep.env.step(Action(kind="search", query=ep.task.question.strip()))
        shown = [im.page_id for im in res.observation.images]
        gold = set(p for p in ep.task.evidence_pages)
        ep.extra.update(
            shown_pages=shown, top_k=self.env.top_k, ranked_pages=list(st.searches[-1]["hits"]) if st.searches else [],
            sufficient=bool(gold) and gold <= set(shown),
        )
        if not shown:  # nothing retrieved: there is no single turn to take
            st.done, st.status, st.reason = True, "no_answer", "the search returned no page for the question"
            return
        text = INSTRUCTION.format(k=len(shown), question=ep.task.question.strip())
        ep.prompt = [Message(role="user", text=text, images=list(res.observation.images))]

    async def refine(self, ep: "EpisodeState", action: Action, text: str) -> tuple[Action, str]:
        """Evidence is written per image shown (the paper scores it per image): an answer with a line for an image
        never shown, or without a line for one that was, is refused with the format prompt."""
        n = len(ep.extra.get("shown_pages") or ())
        if action.kind == "answer" and len(action.evidence) != n:
            return Action(kind="invalid", reason=evidence_count_problem(len(action.evidence), n)), text
        return action, text


def evidence_count_problem(n_lines: int, n_images: int) -> str:
    return (f"<evidence> holds {n_lines} line(s) for {n_images} image(s) shown; write exactly one [i]: line per image, "
            f"[1] to [{n_images}]")


GRAMMAR = dataclasses.replace(OBSERVE_EVIDENCE_ANSWER, name="evisrag")

RECIPE = register(EvisragRecipe(
    name="evisrag",
    paper="EVisRAG (seed 003)",
    grammar=GRAMMAR,
    system_prompt="",
    user_template="{question}",
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=1003520, search_mode="first_unseen", top_k=3,
                 # 1 retrieval step + 2 free answer attempts; the forced-answer turn makes the 3rd
                 scope="corpus", max_turns=3, prompts=EnvPrompts(invalid=INVALID)),
    roles=(RoleSpec("policy", "the teacher that writes the observe/evidence/think/answer reply", vision=True),
           RoleSpec("judge", "decides whether the final answer matches the reference", required=False),
           RoleSpec("student", "the SFT model; RL tasks it always answers right are dropped", required=False, vision=True)),
    # SFT: the 80 % SFT part, correct trajectories only
    filters=(TaskSplit(part="sft", rl_share=0.2), Correctness(), Dedup()),
    # RL: the 20 % GRPO part, minus what the student always answers (8 samples), simple -> complex
    rl_filters=(TaskSplit(part="rl", rl_share=0.2), Difficulty(rule="not_always_right", samples=8, temperature=1.0),
                RlOrder(order="simple_first")),
    augmentations=(TeacherTopKVariants(instruction=INSTRUCTION),),
    # RS-GRPO token scopes (eq. 7)
    reward=RewardSpec("evisrag", scopes={"observe": ("perception", "format"), "evidence": ("perception", "format"),
                                         "think": ("derivation", "format"), "answer": ("derivation", "format"),
                                         "other": ("format",)}),
    export=ExportHints(max_pixels=3920000, data_source="rag", sft=SftHints(16384, 5.0e-7, 1.0, 4, "EVisRAG Table 5"),
                       evidence_rows=True,
                       # the paper's SFT samples: one correct reply in the four-tag form, over pages it was shown
                       gate=SampleGate(saw_pages=True, max_assistant_turns=1, evidence_per_image=True)),
    oracle=OracleSpec(style="evidence", crop_gold=False),
    options_model=EvisragOptions,
    # what prepare() records: the shown pages and the sufficiency label (read by the exporter), the search's top-k and ranking
    extra_keys=(SHOWN_PAGES, SUFFICIENT, ExtraKey("top_k", int, "pages the retrieval showed at most"),
                ExtraKey("ranked_pages", list, "the retrieval's page ids in rank order")),
    setup_steps=1,  # the retrieval before the single turn is an environment step, not a policy turn
))
