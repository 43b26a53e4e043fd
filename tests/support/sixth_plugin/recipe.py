"""Its recipe: a ReAct loop with crops whose final answer the checker re-reads, scored by its own reward, filtered by
its own filter."""

import dataclasses

from sixth_plugin.filters import CHECKS, CheckerAgreed
from sixth_plugin.roles import CHECKER
from vrag_data.env.grammar import REACT_CROP
from vrag_data.filters import Correctness, Structure
from vrag_data.recipe import ExportHints, OracleSpec, Recipe, RewardSpec, RoleSpec, SftHints, base_env, register
from vrag_data.schema.records import Message


class CheckedRecipe(Recipe):
    async def finish(self, ep) -> None:
        answer = next((t.action.answer for t in reversed(ep.turns) if t.action.kind == "answer"), None)
        if answer is None:
            return
        msgs = [Message(role="user", text=f"Question: {ep.task.question}\nProposed answer: {answer}\n"
                                          "Reply `CONFIRMED: <answer>` or `REJECTED`.")]
        reply = await ep.ask("checker", msgs, "checker")
        ep.note(CHECKS.name, {"reply": reply.text, "agrees": reply.text.strip() == f"CONFIRMED: {answer}"})


RECIPE = register(CheckedRecipe(
    name="checked_crop",
    paper="a test recipe",
    grammar=dataclasses.replace(REACT_CROP, name="checked_crop"),
    system_prompt=("Answer from document page images. Think inside <think></think>, then write one of "
                   "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> (pixels of the last page) or <answer>answer</answer>."),
    user_template="Q: {question}",
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=200704, search_mode="first_unseen", top_k=1, scope="corpus",
                 max_turns=6),
    roles=(RoleSpec("policy", "takes every action"), CHECKER),
    filters=(Structure(max_retrievals=5), Correctness(threshold=0.5), CheckerAgreed()),
    reward=RewardSpec("checked_answer", scopes={"answer": ("correct",), "other": ("brief",)}),
    export=ExportHints(max_pixels=200704, data_source="checked_source", sft=SftHints(8192, 2.0e-5, 2.0, 1, "the test's own")),
    oracle=OracleSpec(style="react", crop_gold=True),
    extra_keys=(CHECKS,),
))
