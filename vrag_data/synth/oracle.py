"""The oracle policy: a deterministic, gold-guided stand-in for the teacher, for offline runs (demo, CI).

It is NOT a model and its trajectories are not evidence that a model can solve the task: it reads the gold
answer, gold pages and gold boxes of the task. It exists so the whole pipeline (environment, recipes,
filters, exports, trainer) can run without a GPU, on the environment's real code paths: it searches with
the question, and when BM25 does not surface a gold page it reformulates (first with the gold page's own
text, then by naming the page: "<document> page N", which the index matches through its page-label terms);
every reformulation is recorded in `extra["oracle"]`. It selects gold candidates, crops the gold box when
one is known (else the layout block whose text best contains the answer), and answers the gold answer. Its
text is written with `render_action` in the recipe's exact grammar, so it parses back to the same action.
Provenance says `policy="oracle"`.

One callable answers every role: `OraclePolicy()(role, phase, episode)`; `phase` says which request it is
("policy", "grounding", "candidates", "planner", "reader", "answer"); the recipe puts what the request is
about into `episode.scratch` before asking. A role a recipe brings with its own `RoleSpec.oracle` is answered by
that function instead.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from vrag_data.augment.visor import VERIFY_TEMPLATE
from vrag_data.env import render_action, sanitize_text
from vrag_data.env.grammar import OBSERVE_EVIDENCE_ANSWER
from vrag_data.env.geometry import box_area as _area
from vrag_data.env.geometry import box_to_model, iou
from vrag_data.env.geometry import intersection as _inter
from vrag_data.rewards.answer import INSUFFICIENT, normalize_answer
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import Action, Message, ReadRequest, Task

if TYPE_CHECKING:
    from vrag_data.synth.episode import EpisodeRun

NO_INFO = "no relevant information"
QUERY_SOURCES = ("question", "gold_text", "page_name")
_STOP = {"what", "which", "when", "where", "who", "whom", "whose", "how", "many", "much", "does", "did", "was", "were",
         "the", "and", "for", "with", "from", "that", "this", "its", "their", "according", "in", "of", "to", "a", "an",
         "is", "are", "by", "on", "at", "as", "be", "it", "or", "than", "into", "have", "has", "had", "what's"}


# --------------------------------------------------------------------------- gold geometry


def gold_boxes(ep: "EpisodeRun", page_id: str) -> list[Box]:
    return [b.box for b in ep.task.evidence_boxes if b.page_id == page_id]


def answer_block(ep: "EpisodeRun", page_id: str) -> Box | None:
    """The smallest layout block of the page whose text contains the (normalised) answer."""
    ans = normalize_answer(ep.task.answer)
    if not ans or len(ans) > 200:
        return None
    hits = [b for b in ep.layout.get(page_id, []) if ans in normalize_answer(b.text)]
    return min(hits, key=lambda b: _area(b.bbox.raw)).bbox if hits else None


def target_box(ep: "EpisodeRun", page_id: str) -> tuple[Box, str] | None:
    """(box, how) to crop on `page_id`: the gold box (several on one page: their union), else the answer block."""
    boxes = gold_boxes(ep, page_id)
    page = ep.pages.get(page_id)
    if boxes and page is not None:
        raw = (min(b.raw[0] for b in boxes), min(b.raw[1] for b in boxes), max(b.raw[2] for b in boxes), max(b.raw[3] for b in boxes))
        return Box.from_raw(raw, page.width, page.height), "gold_box"
    block = answer_block(ep, page_id)
    return (block, "layout_block") if block is not None else None


def model_box(ep: "EpisodeRun", page_id: str, box: Box) -> list[int]:
    """`box` as the teacher writes it in the recipe's coordinate space."""
    page = ep.pages[page_id]
    return box_to_model(box, ep.env.settings.coord_space, (page.width, page.height), ep.env.settings.resize_rule())


def best_candidate(target: Box, boxes: list[Box]) -> int | None:
    """0-based index of the candidate that best matches `target`: highest IoU, else the smallest box that
    covers most of the target. None when nothing overlaps enough."""
    if not boxes:
        return None
    scores = [iou(target.raw, b.raw) for b in boxes]
    i = max(range(len(boxes)), key=lambda k: scores[k])
    if scores[i] >= 0.3:
        return i
    tarea = _area(target.raw) or 1.0
    covering = [k for k, b in enumerate(boxes) if _inter(target.raw, b.raw) / tarea >= 0.8]
    return min(covering, key=lambda k: _area(boxes[k].raw)) if covering else None


# --------------------------------------------------------------------------- helpers


def box_text(task: Task, page_id: str) -> str:
    texts = [b.text.strip() for b in task.evidence_boxes if b.page_id == page_id and b.text.strip()]
    # document text goes into the oracle's own (trained-on) replies: tags defanged so it cannot act
    return sanitize_text("; ".join(dict.fromkeys(texts)))


def evidence_text(ep: "EpisodeRun", page_id: str) -> str:
    return box_text(ep.task, page_id)


def evidence_answer(task: Task, shown: list[str], gold: set[str]) -> Action:
    """The one-turn observe/evidence/think/answer reply over `shown` pages, knowing which are gold."""
    sufficient = bool(gold) and gold <= set(shown)
    lines, relevant = [], []
    for i, pid in enumerate(shown, 1):
        if pid in gold:
            relevant.append(i)
            ev = box_text(task, pid)
            lines.append(f"it shows {ev}" if ev else f"it holds information that answers the question ({task.answer})")
        else:
            lines.append(NO_INFO)
    observe = (f"The question asks: {task.question.strip()} Image(s) {relevant} hold relevant content; the others do not."
               if relevant else f"The question asks: {task.question.strip()} None of the {len(shown)} image(s) holds relevant content.")
    if sufficient:
        think, answer = f"The evidence in image(s) {relevant} gives the answer: {task.answer}.", task.answer
    else:
        think, answer = "The images do not hold all the evidence the question needs, so it cannot be answered from them.", INSUFFICIENT
    return Action(kind="answer", observe=observe, evidence=lines, thought=think, answer=answer)


def _page_head(ep: "EpisodeRun", page_id: str, words: int = 14) -> str:
    page = ep.pages.get(page_id)
    if page is None:
        return ""
    text = page.text if page.text.strip() else page.ocr_text
    return sanitize_text(" ".join(text.split()[:words]))  # becomes a <search> query: no tags from the page


def keywords(question: str, n: int = 4) -> list[str]:
    out: list[str] = []
    for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9&.\-']*", question):
        w = re.sub(r"'s$", "", w.strip(".'"))
        if len(w) < 3 or w.lower() in _STOP or w.lower() in (x.lower() for x in out):
            continue
        out.append(w)
    # names and numbers first: they are what a keyword search finds reliably
    out.sort(key=lambda w: not (w[0].isupper() or w[0].isdigit()))
    return out[:n] or [question.strip()[:60]]


def _query_key(q: str) -> str:
    return " ".join(q.lower().split())


class OraclePolicy:
    """`OraclePolicy()(role, phase, ep) -> text`; see the module docstring."""

    name = "oracle"

    def __call__(self, role: str, phase: str, ep: "EpisodeRun") -> str:
        own = next((s.oracle for s in getattr(ep.recipe, "roles", ()) if s.name == role and s.oracle is not None), None)
        if own is not None:  # a role the recipe brings answers by its own rule (`RoleSpec.oracle`)
            return own(ep)
        handler = {
            "policy": self._policy,
            "grounding": self._grounding,
            "candidates": self._candidates,
            "planner": self._plan,
            "reader": self._reader,
            "answer": self._answer_agent,
        }.get(phase)
        if handler is None:
            raise ValueError(f"the oracle has no reply for phase {phase!r} of role {role!r}; a recipe's own role "
                             "says how the oracle answers it (`RoleSpec.oracle`)")
        return handler(ep)

    # ------------------------------------------------------------------ policy turns

    def _policy(self, ep: "EpisodeRun") -> str:
        style = ep.recipe.oracle.style
        if style == "evidence":
            return self._evisrag(ep)
        if style == "seeker":
            return self._seeker(ep)
        return self._react(ep)

    def _gold(self, ep: "EpisodeRun") -> list[str]:
        return [p for p in ep.task.evidence_pages if p in ep.pages]

    def _answer(self, ep: "EpisodeRun", why: str) -> str:
        a = Action(kind="answer", thought=why, answer=ep.task.answer)
        return render_action(a, ep.recipe.grammar)

    def _react(self, ep: "EpisodeRun") -> str:
        st, g, task = ep.env.state, ep.recipe.grammar, ep.task
        gold = self._gold(ep)
        last = ep.turns[-1] if ep.turns else None
        shown_now = last is not None and last.observation is not None and last.observation.kind == "search" and bool(last.observation.images)
        if st.forced:
            return self._answer(ep, f"No turns are left; from what I found, the answer is {task.answer}.")
        selects = ep.env.settings.search_mode == "candidates"
        if selects and shown_now and st.candidates and last.action.kind == "search":  # type: ignore[union-attr]
            base = ep.env.settings.select_base
            idx = [i + base for i, p in enumerate(st.candidates) if p in gold and p not in st.selected_pages]
            if not gold:  # nothing to find: keep the top candidate (UniDoc-RL's pseudo-positive)
                idx = [base]
            if idx:
                act = Action(kind="select", thought=f"Candidate(s) {idx} relate to the question.", indices=idx)
                return render_action(act, g)
        if ep.recipe.oracle.crop_gold and shown_now and st.current_page in gold:
            pid = st.current_page
            assert pid is not None
            cropped = {c.page_id for c in st.crops}
            tb = target_box(ep, pid)
            if pid not in cropped and tb is not None:
                what = evidence_text(ep, pid)
                note = f" It should read '{what}'." if what else ""
                thought = f"This page holds the information the question asks for; I will zoom into that region to read it.{note}"
                act = Action(kind="crop", thought=thought, boxes=[[float(v) for v in model_box(ep, pid, tb[0])]])
                ep.note("oracle", {"turn": st.turn + 1, "crop": tb[1], "page_id": pid})
                return render_action(act, g)
        seen = set(st.selected_pages) if selects else set(st.retrieved_pages) | set(st.selected_pages)
        missing = [p for p in gold if p not in seen]
        if st.n_searches and not missing:
            if gold:  # page ids stay out of the text: the student never sees them in these recipes
                return self._answer(ep, f"The evidence I found answers the question: {task.answer}.")
            return self._answer(ep, "The pages found do not contain what the question asks for.")
        query, how = self._next_query(ep, missing[0] if missing else None)
        if query is None:
            ep.note("oracle", {"turn": st.turn + 1, "missed": missing})
            return self._answer(ep, f"I could not find every page I need; my best answer is {task.answer}.")
        ep.note("oracle", {"turn": st.turn + 1, "query_source": how, "target": missing[0] if missing else None})
        thought = {
            "question": f"I need to find the page that answers: {task.question.strip()} I will search with the question.",
            "gold_text": "The pages so far do not answer the question; I will search again with more specific words.",
            "page_name": "I will look the page up by its document and page number.",
        }[how]
        return render_action(Action(kind="search", thought=thought, query=query), g)

    def _next_query(self, ep: "EpisodeRun", target: str | None) -> tuple[str | None, str]:
        used = ep.env.state.query_keys
        tries = ep.scratch.setdefault("oracle_tries", {})
        start = tries.get(target or "", 0)
        sources = QUERY_SOURCES if target else QUERY_SOURCES[:1]
        for k in range(start, len(sources)):
            how = sources[k]
            if how == "question":
                q = ep.task.question.strip()
            elif how == "gold_text":
                q = _page_head(ep, target or "")
            else:
                page = ep.pages[target or ""]
                q = f"{page.stem.replace('_', ' ').replace('-', ' ')} page {page.page}"
            tries[target or ""] = k + 1
            if q and _query_key(q) not in used:
                return q, how
        return None, ""

    def _evisrag(self, ep: "EpisodeRun") -> str:
        act = evidence_answer(ep.task, list(ep.extra.get("shown_pages", [])), set(self._gold(ep)))
        return render_action(act, ep.recipe.grammar)

    def _seeker(self, ep: "EpisodeRun") -> str:
        st, task = ep.env.state, ep.task
        gold = self._gold(ep)
        if st.forced:
            return render_action(Action(kind="finish", thought="No steps are left; the answer agent takes over."), ep.recipe.grammar)
        if st.n_searches == 0:
            kws = keywords(task.question)
            act = Action(kind="search", thought=f"First I locate the pages that mention {', '.join(kws)}.", keywords=kws)
            return render_action(act, ep.recipe.grammar)
        unread = [p for p in gold if p not in st.read_pages]
        if unread or (not gold and not st.read_pages):
            pages = unread or self._top_hits(ep)
            names = [str(ep.pages[p].page) if ep.pages[p].stem == (task.doc_stems or [""])[0] else p for p in pages]
            act = Action(kind="read", thought=f"I read page(s) {', '.join(names)} to check what they say about the question.",
                         reads=[ReadRequest(page_ids=names, query=task.question.strip())])
            return render_action(act, ep.recipe.grammar)
        return render_action(Action(kind="finish", thought="The pages read hold what the question needs."), ep.recipe.grammar)

    def _top_hits(self, ep: "EpisodeRun") -> list[str]:
        hits = [p for s in ep.env.state.searches for p in s["hits"] if p in ep.pages]
        if hits:
            return list(dict.fromkeys(hits))[:2]
        stem = (ep.task.doc_stems or [""])[0]
        first = f"{stem}_1"
        return [first] if first in ep.pages else list(ep.pages)[:1]

    # ------------------------------------------------------------------ side requests

    def _grounding(self, ep: "EpisodeRun") -> str:
        req = ep.scratch["grounding"]
        tb = target_box(ep, req["page_id"])
        box = model_box(ep, req["page_id"], tb[0]) if tb else [round(v) for v in req["teacher_boxes"][0]]
        return f"<bbox>{json.dumps(box)}</bbox>"

    def _candidates(self, ep: "EpisodeRun") -> str:
        req = ep.scratch["candidates"]
        tb = target_box(ep, req["page_id"])
        i = best_candidate(tb[0], req["boxes"]) if tb else None
        if i is None:
            return "<think>The page is legible as it is; no region needs a closer look.</think>\n<select>[0]</select>"
        what = (req.get("classes") or [""] * len(req["boxes"]))[i] or "region"
        return f"<think>The {what} holding the detail the question asks about is small on the full page; a closer view helps.</think>\n<select>[{i + 1}]</select>"

    def _plan(self, ep: "EpisodeRun") -> str:
        kws = keywords(ep.task.question)
        return ("Here is my proposed initial plan.\n"
                f"(1) Search the document for the keywords {kws}.\n"
                "(2) Read the pages the search points to, asking for the facts the question needs.\n"
                "(3) Stop once the pages read contain the answer, and hand over to the answer agent.")

    def _reader(self, ep: "EpisodeRun") -> str:
        req: ReadRequest = ep.scratch["read"]
        gold = set(self._gold(ep))
        lines = []
        for pid in req.page_ids:
            page = ep.pages.get(pid)
            n = page.page if page else pid
            if pid in gold:
                ev = evidence_text(ep, pid)
                lines.append(f"Page {n}: {('shows ' + ev + '; ') if ev else ''}relevant to the query, the answer is {ep.task.answer}.")
            else:
                lines.append(f"Page {n}: nothing relevant to the query.")
        if not gold & set(req.page_ids):
            lines.append("Cannot answer due to insufficient data.")
        return "\n".join(lines)

    def _answer_agent(self, ep: "EpisodeRun") -> str:
        return render_action(Action(kind="answer", thought="The information gathered answers the question.", answer=ep.task.answer), ep.recipe.grammar)


class OracleAugmenter:
    """The oracle as the augmenting teacher (offline runs): it reads the task's gold, writes in the same formats
    a teacher would and is labelled "oracle" in every trajectory it writes (`extra["augmented_by"]`)."""

    label = "oracle"

    def __init__(self, task: Task) -> None:
        self.task = task

    async def __call__(self, messages: list[Message], sample: int, purpose: str = "") -> str:
        if purpose == "verification":
            user = messages[-1].text
            m = re.search(r"Proposed answer: (.*)", user)
            answer = (m.group(1).strip() if m else "") or self.task.answer
            return f"<think>{VERIFY_TEMPLATE.format(answer=answer)}</think>\n<answer>{answer}</answer>"
        if purpose == "evidence_answer":
            shown = [im.page_id for m in messages for im in m.images]
            return render_action(evidence_answer(self.task, shown, set(self.task.evidence_pages)), OBSERVE_EVIDENCE_ANSWER)
        raise ValueError(f"the oracle augmenter has no reply for {purpose!r}")
