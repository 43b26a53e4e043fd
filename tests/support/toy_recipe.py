"""A sixth recipe, defined in test code and nowhere else (no library file, no entry point): a ReAct loop with crops,
its own filter chain, an augmentation and export hints. `tests/recipe/test_recipe_toy.py` runs it through every stage;
`tests/flows/test_recipe_toy_flows.py` names it in a run config as `tests.support.toy_recipe:TOY` and runs it through
`vrag-data run` on threads and on Ray workers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from vrag_data.augment import Augmented, derive
from vrag_data.env.grammar import REACT_CROP, Grammar
from vrag_data.filters import Correctness, Structure
from vrag_data.recipe import ExportHints, OracleSpec, Recipe, RewardSpec, RoleSpec, SftHints, base_env
from vrag_data.schema.records import Task, Trajectory


@dataclasses.dataclass(frozen=True)
class ShortThoughts:
    """A toy augmentation: the same trajectory with every thought cut to its first sentence."""

    name: str = "short_thoughts"

    def apply(self, traj: Trajectory, task: Task, grammar: Grammar, doc_pages: Mapping[str, Sequence[str]]) -> Augmented:
        from vrag_data.env import render_action

        turns = []
        for t in traj.turns:
            action = t.action.model_copy(update={"thought": t.action.thought.split(". ")[0]})
            turns.append(t.model_copy(update={"action": action, "assistant": render_action(action, grammar)}))
        return Augmented([derive(traj, self.name, turns=turns)])


TOY = Recipe(
    name="toy_crop",
    paper="a test recipe",
    grammar=dataclasses.replace(REACT_CROP, name="toy_crop"),
    system_prompt=("Answer from document page images. Think inside <think></think>, then write one of "
                   "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> (pixels of the last page) or <answer>answer</answer>."),
    user_template="Q: {question}",
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=200704, search_mode="first_unseen", top_k=1, scope="corpus", max_turns=6),
    roles=(RoleSpec("policy", "takes every action"),),
    filters=(Structure(max_retrievals=5), Correctness(threshold=0.5)),
    augmentations=(ShortThoughts(),),
    reward=RewardSpec("vrag_rl", scopes={"search": ("ndcg",), "bbox": ("ndcg",), "answer": ("judge",), "other": ("format",)}),
    export=ExportHints(max_pixels=200704, data_source="toy_source", sft=SftHints(8192, 2.0e-5, 2.0, 1, "the toy's own table")),
    oracle=OracleSpec(style="react", crop_gold=True),
)
