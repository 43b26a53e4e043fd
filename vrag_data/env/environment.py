"""The agent environment: executes parsed actions against the corpus and returns observations.

It never trusts model output: malformed actions, out-of-range indices or boxes, repeated searches, an
answer before any search and a crop before any page become observations of kind "error" carrying the
recipe's re-prompt (counted in the state), never exceptions. Observations reference pages and boxes
(`ImageRef`), never image bytes. The model calls of the `read` tool and the grounding expert are the
recipe's job; the environment records what was asked.

The turn budget is one rule for every recipe, whatever the policy writes: `max_turns` free turns (invalid
actions count); when they are spent without an accepted answer, one more turn with the forced-answer prompt
(none when the recipe has no such prompt); a forced turn that does not yield an accepted answer (anything but
an answer, or an answer the environment rejects) ends the episode with status "budget". An episode therefore
takes at most `max_turns + 1` turns, and at most `max_turns + 1` read requests (one reader call each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from vrag_data.env.geometry import crop_box
from vrag_data.env.sanitize import sanitize_text
from vrag_data.env.settings import EnvSettings
from vrag_data.env.state import EnvState
from vrag_data.retrieve.base import Searcher, SearchHit
from vrag_data.schema.records import Action, CropRecord, ImageRef, LayoutBlock, Observation, Page, ReadRequest, Task


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    done: bool
    invalid: bool = False
    status: str | None = None  # FinishStatus once done


class Environment:
    def __init__(
        self,
        task: Task,
        searcher: Searcher,
        pages: Mapping[str, Page],
        layout: Mapping[str, list[LayoutBlock]] | None = None,
        settings: EnvSettings | None = None,
    ) -> None:
        self.task = task
        self.searcher = searcher
        self.pages = pages
        self.layout = layout or {}
        self.settings = settings or EnvSettings()
        self.state = EnvState(question=task.question)
        self._rule = self.settings.resize_rule()

    # ------------------------------------------------------------------ public

    def display_size(self, page_id: str) -> tuple[int, int] | None:
        """(width, height) of the page as the model sees it (for qwen2.5-vl pixel coordinates)."""
        page = self.pages.get(page_id)
        if page is None:
            return None
        return self._rule.display_size(page.width, page.height)

    def step(self, action: Action) -> StepResult:
        st = self.state
        if st.done:
            raise RuntimeError("step() called after the episode ended")
        st.turn += 1
        self._record_evidence(action)
        if st.forced and action.kind not in ("answer", "finish"):
            # the forced turn is the last one: only an answer (or the seeker's end marker) is carried out
            why = action.reason if action.kind == "invalid" else f"<{action.kind}> instead of an answer"
            return self._finish("budget", f"no answer after the forced-answer prompt: {why}", invalid=action.kind == "invalid")
        handler = {
            "search": self._search,
            "select": self._select,
            "crop": self._crop,
            "read": self._read,
            "answer": self._answer,
            "finish": self._finish_marker,
        }.get(action.kind)
        if handler is None:
            reason = action.reason if action.kind == "invalid" else f"{action.kind!r} is not an action"
            result = self._invalid(reason or "malformed action")
        else:
            result = handler(action)
        return self._after(result)

    # ------------------------------------------------------------------ bookkeeping

    def _record_evidence(self, action: Action) -> None:
        # VISOR: what the agent thinks right after looking at a page (or its crop) is its note on that page
        st = self.state
        if st.last_view is not None and action.thought and action.kind != "invalid":
            st.evidence.setdefault(st.last_view[0], []).append(action.thought)
        st.last_view = None

    def _invalid(self, reason: str) -> StepResult:
        st = self.state
        st.n_invalid += 1
        st.invalid_reasons.append(reason)
        obs = Observation(kind="error", text=self.settings.prompts.invalid.format(reason=reason))
        if self.settings.max_invalid is not None and st.n_invalid >= self.settings.max_invalid:
            st.done, st.status, st.reason = True, "error", f"too many invalid actions ({st.n_invalid}); last: {reason}"
            return StepResult(obs, True, True, "error")
        return StepResult(obs, False, True)

    def _finish(self, status: str, reason: str = "", invalid: bool = False) -> StepResult:
        st = self.state
        st.done, st.status, st.reason = True, status, reason
        if invalid:
            st.n_invalid += 1
            st.invalid_reasons.append(reason)
        return StepResult(Observation(kind="info", text=""), True, invalid, status)

    def _after(self, res: StepResult) -> StepResult:
        st, s = self.state, self.settings
        if res.done:
            return res
        if st.forced:
            # the forced turn gave an answer the environment rejected (e.g. before any search): re-prompting here
            # is what kept episodes open for hundreds of turns; the budget is spent
            why = st.invalid_reasons[-1] if res.invalid and st.invalid_reasons else "no accepted answer"
            return self._budget(f"no accepted answer after the forced-answer prompt: {why}", res.invalid)
        if st.turn >= s.max_turns:
            if not s.prompts.forced_answer:  # no forced-answer prompt: no extra turn either
                return self._budget(f"no answer within {s.max_turns} turn(s)", res.invalid)
            # the turn budget is spent without an answer: one more turn, with the forced-answer prompt (VISOR
            # injects it "when the maximum number of turns is reached"); anything but an answer then ends the episode
            st.forced, st.forced_text = True, s.prompts.forced_answer
            text = "\n\n".join(t for t in (res.observation.text, s.prompts.forced_answer) if t)
            return StepResult(res.observation.model_copy(update={"text": text}), False, res.invalid)
        return res

    def _budget(self, reason: str, invalid: bool) -> StepResult:
        st = self.state
        st.done, st.status, st.reason = True, "budget", reason
        return StepResult(Observation(kind="info", text=""), True, invalid, "budget")

    def _shown(self) -> set[str]:
        st = self.state
        return {*st.retrieved_pages, *st.selected_pages, *st.read_pages}

    # ------------------------------------------------------------------ tools

    def _search(self, a: Action) -> StepResult:
        st, s = self.state, self.settings
        queries = a.keywords or [a.query]
        queries = [q.strip() for q in queries if q.strip()]
        if not queries:
            return self._invalid("empty search query")
        key = "\x1f".join(sorted(" ".join(q.lower().split()) for q in queries))
        if key in st.query_keys and not s.allow_repeat_search:
            return self._invalid(f"repeated search {queries!r}: this exact search was already made; change the query")
        st.query_keys.add(key)
        doc_stem = self.task.doc_stems[0] if s.scope == "document" and len(self.task.doc_stems) == 1 else None
        ranked = self.searcher.search(queries, top_k=s.search_depth, doc_stem=doc_stem)
        if s.search_mode == "text_hits":
            return self._text_hits(queries, ranked)
        hits = self._merge(ranked)
        seen = self._shown() if s.dedup else set()
        fresh = [h.page_id for h in hits if h.page_id not in seen][: s.top_k]
        st.searches.append({"turn": st.turn, "queries": queries, "hits": [h.page_id for h in hits], "shown": fresh})
        if not fresh:
            return StepResult(Observation(kind="info", text=s.prompts.no_new_pages), False)
        for pid in fresh:
            st.retrieved_pages.append(pid)
        images = [ImageRef(page_id=p) for p in fresh]
        if s.search_mode == "candidates":
            st.candidates = fresh
            st.current_page = None  # a crop waits for a <select>
            # candidates are named by their position among the images shown, never by page id: ids come from file
            # names (untrusted text, and they would tell the policy which document it is looking at)
            listing = "\n".join(f"[{i + s.select_base}] image {i + 1} of {len(fresh)}" for i in range(len(fresh)))
            return StepResult(Observation(kind="search", text=s.prompts.candidates.format(listing=listing), images=images), False)
        st.current_page = fresh[-1]
        st.last_view = (fresh[-1], "page")
        return StepResult(Observation(kind="search", text=s.prompts.search.format(pages=", ".join(sanitize_text(p) for p in fresh)),
                                      images=images), False)

    def _merge(self, ranked: list[list[SearchHit]]) -> list[SearchHit]:
        """Several queries' rankings interleaved by rank, duplicates and unknown pages dropped."""
        out: list[SearchHit] = []
        ids: set[str] = set()
        for rank in range(max((len(r) for r in ranked), default=0)):
            for r in ranked:
                if rank < len(r) and r[rank].page_id not in ids:
                    hit = r[rank]
                    ids.add(hit.page_id)
                    if self.pages and hit.page_id not in self.pages:
                        self.state.skipped_hits += 1
                        continue
                    out.append(hit)
        return out

    def _text_hits(self, queries: list[str], ranked: list[list[SearchHit]]) -> StepResult:
        st, s = self.state, self.settings
        lines: list[str] = []
        all_ids: list[str] = []
        for q, hits in zip(queries, ranked):
            hits = [h for h in hits if not self.pages or h.page_id in self.pages][: s.search_depth]
            if not hits:
                continue
            lines.append(f"{sanitize_text(q)}:")
            for h in hits:
                all_ids.append(h.page_id)
                page = self.pages.get(h.page_id)
                snippet = _snippet(page, q, s.snippet_chars) if page is not None else ""
                # a page the policy can read by its number is named by that number; the id (a file name) is shown
                # only for pages outside the task's document, which <read> can reach by id alone
                name = f"page {h.page}" if self._resolve(str(h.page)) == h.page_id else f"page {h.page} ({sanitize_text(h.page_id)})"
                lines.append(f"  {name}{': ' + snippet if snippet else ''}")
        st.searches.append({"turn": st.turn, "queries": queries, "hits": all_ids, "shown": []})
        # listed pages count as retrieved (in rank order, once each), so NDCG and completeness mean the same
        # for MM-Doc-R1's text search as for the image searches of the other recipes
        st.retrieved_pages.extend(dict.fromkeys(p for p in all_ids if p not in set(st.retrieved_pages)))
        if not lines:
            return StepResult(Observation(kind="search", text=s.prompts.text_hits_empty), False)
        return StepResult(Observation(kind="search", text=s.prompts.text_hits.format(listing="\n".join(lines))), False)

    def _select(self, a: Action) -> StepResult:
        st, s = self.state, self.settings
        if not st.candidates:
            return self._invalid("nothing to select from: search first")
        n, base = len(st.candidates), s.select_base
        chosen: list[str] = []
        for i in a.indices:
            if not base <= i < base + n:
                return self._invalid(f"index {i} is out of range: the last search showed {n} page(s), numbered {base} to {base + n - 1}")
            pid = st.candidates[i - base]
            if pid not in chosen:
                chosen.append(pid)
        if not chosen:
            return self._invalid("<select> chose no page")
        for pid in chosen:
            if pid not in st.selected_pages:
                st.selected_pages.append(pid)
        st.current_page = chosen[-1]
        st.last_view = (chosen[-1], "page")
        images = [ImageRef(page_id=p) for p in chosen]
        return StepResult(Observation(kind="select", text=s.prompts.select.format(pages=", ".join(chosen)), images=images), False)

    def _crop(self, a: Action) -> StepResult:
        st, s = self.state, self.settings
        if not a.boxes:
            return self._invalid("a crop needs at least one box")
        if a.page_ids:
            pid = a.page_ids[0]
            if pid not in self._shown():
                return self._invalid(f"page {sanitize_text(pid)} has not been shown yet; crop only pages you have seen")
        elif st.current_page is None:
            why = "select a page first" if st.candidates else "search first"
            return self._invalid(f"there is no page to crop yet: {why}")
        else:
            pid = st.current_page
        page = self.pages.get(pid)
        if page is None:
            return self._invalid(f"page {sanitize_text(pid)} is not in the corpus")
        raw = (page.width, page.height)
        display = self._rule.display_size(*raw) if s.coord_space == "qwen2.5-vl" else None
        regions = []
        targets = []
        for i, box in enumerate(a.boxes):
            res = crop_box(box, s.coord_space, raw, display, s.crop_margin, s.min_crop)
            if not res.ok:
                where = f"box {i + 1}: " if len(a.boxes) > 1 else ""
                return self._invalid(where + res.reason)
            regions.append(res.region)
            targets.append(res.target)
        for t in targets:
            st.crops.append(CropRecord(turn=st.turn, page_id=pid, box=t))
        ref = ImageRef(page_id=pid, box=regions[0]) if len(regions) == 1 else ImageRef(page_id=pid, stacked=regions)
        st.last_view = (pid, "crop")
        return StepResult(Observation(kind="crop", text=s.prompts.crop, images=[ref]), False)

    def _resolve(self, p: str) -> str | None:
        if p in self.pages:
            return p
        if p.isdigit() and self.task.doc_stems:  # MM-Doc-R1 names pages by number within the document
            for stem in self.task.doc_stems:
                if f"{stem}_{int(p)}" in self.pages:
                    return f"{stem}_{int(p)}"
        return None

    def _read(self, a: Action) -> StepResult:
        st, s = self.state, self.settings
        reads = a.reads or ([ReadRequest(page_ids=a.page_ids, query=a.query)] if a.page_ids else [])
        if not reads:
            return self._invalid("<read> needs page_ids and a query")
        left = s.max_turns + 1 - len(st.reads)  # each request costs one reader call: bounded like the turns
        if len(reads) > left:
            return self._invalid(f"this read makes {len(reads)} requests but only {max(0, left)} more may be made in this episode")
        resolved: list[ReadRequest] = []
        for r in reads:
            ids = []
            for p in r.page_ids:
                rid = self._resolve(p)
                if rid is None:
                    return self._invalid(f"page {sanitize_text(p)} does not exist in this document")
                if rid not in ids:
                    ids.append(rid)
            if len(ids) > s.max_read_pages:
                return self._invalid(f"a read request may name at most {s.max_read_pages} pages, got {len(ids)}")
            resolved.append(ReadRequest(page_ids=ids, query=r.query))
        pages: list[str] = []
        for r in resolved:
            st.reads.append(r)
            for pid in r.page_ids:
                if pid not in pages:
                    pages.append(pid)
                if pid not in st.read_pages:
                    st.read_pages.append(pid)
        images = [ImageRef(page_id=p) for p in pages]
        return StepResult(Observation(kind="read", text=s.prompts.read.format(pages=", ".join(pages)), images=images), False)

    def _answer(self, a: Action) -> StepResult:
        st, s = self.state, self.settings
        if s.require_search_before_answer and st.n_searches == 0 and not st.read_pages:
            return self._invalid("answer before any search: look at the documents first")
        st.final_answer = a.answer
        return self._finish("answered")

    def _finish_marker(self, a: Action) -> StepResult:
        # MM-Doc-R1's <FINISH> ends the seeker loop; the recipe's answer agent writes the final answer
        return self._finish("no_answer", "seeker finished; answer pending")


def _snippet(page: Page, query: str, n: int) -> str:
    """A sanitized window of the page text around the first occurrence of the query."""
    if n <= 0:
        return ""
    text = " ".join((page.text or page.ocr_text).split())
    if not text:
        return ""
    at = text.lower().find(query.lower())
    start = max(0, at - n // 3) if at >= 0 else 0
    return sanitize_text(text[start : start + n])
