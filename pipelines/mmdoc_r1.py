"""MM-Doc-R1 (seed 004): planner -> seeker loop -> answer agent, within one document.

- Planner (`planner` role): the question, the document's table of contents and list of figures/tables
  (from the ingested `Document`) in; a numbered plan of at most 10 steps out (`extra["plan"]`).
- Seeker (`policy` role, the agent being trained): reasons, then calls one tool per step:
  `<search>["kw1", "kw2"]</search>` = BM25 keyword search restricted to the task's document, returning the
  10 best matching pages per keyword (the paper's top-k knee) with short snippets; `<read>[{"page_ids": [4, 5], "query": "..."}]</read>` = the `reader`
  role (a VLM) looks at those page images and reports what bears on the question and the sub-query; the
  seeker sees the reader's text, not the images; `<FINISH>` ends the loop.
- Answer agent (`policy` role, answer prompt): writes the final answer from the gathered information only: the
  tool outputs and the OCR / text layer of every page read (the paper's ablation shows the OCR text matters).

Where we differ, and why:
- The seeker's history is the whole conversation (append-only) instead of a re-rendered "steps already
  taken" list: the same information, in a form SFT exports can replay turn by turn.
- Tool calls are bare tags (`<search>`, `<read>`, `<FINISH>`) after a `<think>` block instead of fenced
  `tool_code` blocks, so one grammar parses every recipe; the contents (a JSON keyword list, a JSON list of
  page/query requests) are the paper's.
- The answer agent puts its answer in `<answer>` (one re-prompt when it does not), so the final answer can
  be scored without guessing where it starts. Its prompt is recorded (`extra["role_prompts"]["answer"]`), so SFT
  exports give the seeker and the answer agent one record each, each under its own prompt and grammar. A seeker that runs out of turns still hands over to the
  answer agent, as the paper's pipeline always ends with it.
- Cross-document tasks search the whole corpus (the paper is single-document).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pipelines.base import ExportHints, ExtraKey, OracleSpec, Recipe, RewardSpec, RoleSpec, SampleGate, base_env, register_role
from vrag_data.env import EnvPrompts, sanitize_text
from vrag_data.env.grammar import KEYWORD_READ_FINISH
from vrag_data.filters import Correctness, Dedup, Structure
from vrag_data.recipe import register
from vrag_data.schema.extra_keys import ROLE_PROMPTS
from vrag_data.schema.records import ImageRef, Message, Observation, Turn

if TYPE_CHECKING:
    from vrag_data.recipe.episode_state import EpisodeState

PLANNER = (
    "You plan how to explore a long document to answer a question, using every clue the document's structure offers.\n"
    "You get the question, the document's table of contents and its list of figures and tables. Those who carry out "
    "your plan have two tools: (1) search: keywords in, the pages that contain them out (several keywords at once); "
    "(2) read: up to 5 pages are read and their content prepared for analysis.\n"
    "Write a goal-directed plan that builds up step by step, at most 10 steps, in exactly this form:\n"
    "Here is my proposed initial plan.\n(1) ...\n(2) ...\n"
)
PLANNER_USER = (
    "Question: {question}\nTable of contents:\n<document_toc>\n{toc}\n</document_toc>\n"
    "List of figures and tables:\n<list_of_figures>\n{figures}\n</list_of_figures>"
)
SEEKER = (
    "You gather information from one document, step by step, to answer a question.\n"
    "At every step, first reason inside <think></think>: what is still missing or unclear, which sub-goal comes next, "
    "and which tool fills that gap. Then call exactly one tool:\n"
    "(1) <search>[\"keyword1\", \"keyword2\"]</search> tells you which pages mention these keywords, with short snippets.\n"
    "(2) <read>[{\"page_ids\": [4, 5], \"query\": \"sub-question\"}]</read> has a reader look at those pages (at most 3 "
    "per request; page numbers start at 1) and report what is relevant to your sub-question. State the intent of "
    "each read in its query.\n"
    "(3) <FINISH> once enough information has been gathered.\n"
    "Keep each step short and strategic."
)
SEEKER_USER = "Question: {question}"
READER = (
    "You summarise document pages for a research assistant. You get an original question, a sub-question and page "
    "images.\n1. List the visual elements on the pages: tables, figures, charts, images, text.\n"
    "2. Pick out what is relevant to the original question and to the sub-question (the sub-question is the most "
    "recent need and matters most).\n"
    "3. Report, in this order: a summary of the visual elements, the information relevant to the queries, the key "
    "findings.\nUse only what the images show and add nothing else. If the information needed is not there, say "
    "plainly: \"Cannot answer due to insufficient data\"."
)
READER_USER = "Original question: {question}\nSub-question: {query}\nPages: {pages}"
ANSWER = (
    "Answer the question using only the information provided below; do not invent or assume any detail beyond it. "
    "If the information needed is not there, say that you cannot answer for lack of relevant data.\n"
    "Reason inside <think></think>, then give only the final answer inside <answer></answer>."
)
ANSWER_USER = "Question: {question}\nInformation gathered:\n{info}"
PAGE_TEXT = "Text of page {page} (OCR):\n{text}"
PAGE_TEXT_CHARS = 3000  # per read page: enough for a dense page's text, bounded for the answer agent's context
INVALID = (
    "That step could not be carried out: {reason}. Reason inside <think>...</think>, then call exactly one tool: "
    "<search>[\"keyword\"]</search>, <read>[{{\"page_ids\": [1], \"query\": \"...\"}}]</read> or <FINISH>."
)
FORCED = "No steps are left. End with <FINISH>; the answer agent will answer from what you gathered."
ANSWER_INVALID = "Your reply had no usable answer: {reason}. Reason inside <think>...</think>, then write <answer>...</answer>."


def toc_text(ep: "EpisodeState") -> tuple[str, str]:
    toc, figs = [], []
    for stem in ep.task.doc_stems:
        doc = ep.deps.documents.get(stem)
        if doc is None:
            continue
        # titles and captions come from the document: untrusted text, tags defanged like any observation
        toc += [f"{'  ' * max(0, e.level - 1)}- {sanitize_text(e.title, 300)} (page {e.page})" for e in doc.toc]
        figs += [f"- {f.kind} on page {f.page}{': ' + sanitize_text(f.caption, 300) if f.caption else ''}" for f in doc.figures]
    return "\n".join(toc) or "(no table of contents)", "\n".join(figs) or "(no figures or tables listed)"


def read_pages_text(ep: "EpisodeState", page_ids: list[str]) -> str:
    """The OCR / text layer of the pages the seeker read (the answer agent synthesises tool outputs and OCR text);
    document text is neutralised so it cannot act as markup."""
    parts = []
    for pid in dict.fromkeys(page_ids):
        page = ep.pages.get(pid)
        if page is None:
            continue
        text = " ".join((page.text if page.text.strip() else page.ocr_text).split())[:PAGE_TEXT_CHARS]
        if text:
            parts.append(PAGE_TEXT.format(page=page.page, text=sanitize_text(text)))
    return "\n\n".join(parts)


@dataclasses.dataclass(frozen=True)
class MmdocRecipe(Recipe):
    async def prepare(self, ep: "EpisodeState") -> None:
        toc, figs = toc_text(ep)
        msgs = [Message(role="system", text=self.extra_prompts["planner"]),
                Message(role="user", text=PLANNER_USER.format(question=ep.task.question.strip(), toc=toc, figures=figs))]
        reply = await ep.ask("planner", msgs, "planner")
        # an unusable plan counts as none (recorded in rejected_replies); a plan is quoted into the seeker's prompt, so a
        # chat token or an action tag in it must not reach the seeker as markup
        plan = "" if reply.problem else sanitize_text(reply.text.strip())
        ep.extra["plan"] = plan
        last = ep.prompt[-1]
        ep.prompt[-1] = last.model_copy(update={"text": f"{last.text}\n\nPlan:\n{plan}"})

    async def after_step(self, ep: "EpisodeState", turn: Turn) -> None:
        if turn.action.kind != "read" or turn.observation is None or turn.observation.kind != "read":
            return
        st = ep.env.state
        resolved = st.reads[-max(1, len(turn.action.reads)):]
        parts = []
        for req in resolved:
            ep.scratch["read"] = req
            names = ", ".join(str(ep.pages[p].page) for p in req.page_ids)
            msgs = [Message(role="system", text=self.extra_prompts["reader"]),
                    Message(role="user", text=READER_USER.format(question=ep.task.question.strip(), query=sanitize_text(req.query), pages=names),
                            images=[ImageRef(page_id=p) for p in req.page_ids])]
            # the reader relays page content: a page that says "<answer>..." must not reach the seeker as markup
            reply = await ep.ask("reader", msgs, "reader")
            summary = "" if reply.problem else sanitize_text(reply.text.strip())  # unusable: nothing read (rejected_replies)
            parts.append(f"Read page(s) {names} for \"{req.query}\":\n{summary}")
        action = turn.action.model_copy(update={"page_ids": [p for r in resolved for p in r.page_ids], "reads": resolved})
        ep.turns[-1] = turn.model_copy(update={"action": action, "observation": Observation(kind="read", text="\n\n".join(parts))})
        ep.extra["read_pages"] = list(st.read_pages)

    async def finish(self, ep: "EpisodeState") -> None:
        st = ep.env.state
        if st.final_answer is not None or st.status not in ("no_answer", "budget"):
            return
        info = "\n\n".join(f"Step {t.idx}: {t.observation.text}" for t in ep.turns
                           if t.observation is not None and t.observation.text and t.action.kind in ("search", "read"))
        info = "\n\n".join(x for x in (info, read_pages_text(ep, st.read_pages)) if x)
        msgs = [Message(role="system", text=self.extra_prompts["answer"]),
                Message(role="user", text=ANSWER_USER.format(question=ep.task.question.strip(), info=info or "(nothing was found)"))]
        # the answer agent answers under its own prompt (tool outputs + OCR text of the read pages): recorded, so an
        # SFT export gives it a record of its own instead of gluing its reply onto the seeker's <FINISH>
        ep.extra.setdefault(ROLE_PROMPTS.name, {})["answer"] = [m.model_dump(mode="json") for m in msgs]
        idx = ep.turns[-1].idx if ep.turns else st.turn
        for attempt in range(2):
            reply = await ep.ask("policy", msgs, "answer")
            action = ep.action_of(reply, self.grammar)
            idx += 1
            if action.kind == "answer":
                ep.record(reply.text, action, None, role="answer", idx=idx)
                st.final_answer, st.status, st.reason = action.answer, "answered", ""
                return
            reason = action.reason or f"<{action.kind}> is not an answer"
            st.n_invalid += 1
            st.invalid_reasons.append(f"answer agent: {reason}")
            obs = Observation(kind="error", text=ANSWER_INVALID.format(reason=reason))
            ep.record(reply.text, action, obs, role="answer", idx=idx)
            msgs = [*msgs, Message(role="assistant", text=ep.replayed(reply.text, action)), Message(role="user", text=obs.text)]
        st.reason = "the answer agent gave no <answer>"


GRAMMAR = dataclasses.replace(KEYWORD_READ_FINISH, name="mmdoc_r1")
PLANNER_ROLE = register_role(RoleSpec("planner", "writes the initial plan from the question and the document outline"))
READER_ROLE = register_role(RoleSpec("reader", "reads the requested pages for the seeker's sub-query", vision=True))

RECIPE = register(MmdocRecipe(
    name="mmdoc_r1",
    paper="MM-Doc-R1 (seed 004)",
    grammar=GRAMMAR,
    system_prompt=SEEKER,
    user_template=SEEKER_USER,
    env=base_env(coord_space="qwen2.5-vl", page_max_pixels=1003520, search_mode="text_hits", top_k=10,
                 search_depth=10, scope="document", max_read_pages=3, max_turns=8,
                 prompts=EnvPrompts(invalid=INVALID, forced_answer=FORCED)),
    roles=(RoleSpec("policy", "the seeker (keyword search, read, FINISH) and the answer agent"),
           PLANNER_ROLE,
           READER_ROLE,
           RoleSpec("judge", "decides whether the final answer matches the reference", required=False)),
    filters=(Structure(), Correctness(), Dedup()),
    reward=RewardSpec("mmdoc_r1", scopes={"search": ("recall",), "read": ("recall",), "answer": ("correctness",),
                                          "other": ("recall", "correctness")}),
    # the paper trains with RL only: it gives no SFT settings (the LLaMA-Factory yaml says so)
    export=ExportHints(max_pixels=401408, data_source="rag", sft=None,
                       # the seeker gathers information (a search and a read) before <FINISH>: no closed-book sample
                       gate=SampleGate(requires=("search", "read"), prompt_tags=("document_toc", "list_of_figures")),
                       # the fork's loop is one policy that searches, crops and answers in <answer>: a planner, a seeker
                       # that reads and ends in <FINISH>, a reader and an answer agent do not run there
                       not_for={"vragrl": "VRAG-RL's fork runs one policy with search/crop/answer; this recipe's "
                                          "planner/seeker/reader/answer-agent loop cannot run there; export without "
                                          "--for and train with verl (verl/config.yaml) or EasyR1 (easyr1/)"}),
    oracle=OracleSpec(style="seeker", crop_gold=False),
    extra_prompts={"planner": PLANNER, "reader": READER, "answer": ANSWER},
    extra_keys=(ExtraKey("plan", str, "the planner's plan, quoted into the seeker's prompt"),
                ExtraKey("read_pages", list, "the pages the read tool opened, in order"), ROLE_PROMPTS),
))
