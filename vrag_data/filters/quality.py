"""Per-trajectory quality filters: correctness, retrieval completeness, structure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from vrag_data.filters.base import FilterContext, KeepPassed, verdict
from vrag_data.filters.registry import register_filter
from vrag_data.rewards.answer import answer_correct
from vrag_data.schema.records import Trajectory, Verdict


@dataclass
class Correctness(KeepPassed):
    """The final answer agrees with the reference (UniDoc-RL quality filter, VISOR's last filter).

    Score source, first available: the context's judge callable (the configured judge; its `label` names it in
    the verdict: "rules" or "judge <model>"), a `judge_score` already stored in the trajectory's `extra`, the rule
    scorer. Passes when score >= `threshold`. The reason starts with the source ("rules score 1.00 ...",
    "judge M score 1.00 ...", "judge M (same_as policy) score ..."): the report reads the judge from it.
    """

    threshold: float = 0.5
    name: str = "correctness"
    judges_answers: ClassVar[bool] = True

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        task = ctx.task(item)
        if item.final_answer is None:
            return verdict(item, self.name, False, f"no final answer (status {item.status})", 0.0)
        if ctx.judge is not None:
            s, src = float(ctx.judge(item, task)), str(getattr(ctx.judge, "label", "judge"))
        elif "judge_score" in item.extra:
            s, src = float(item.extra["judge_score"]), "stored judge"
        else:
            s, src = answer_correct(item.final_answer, task.answer, task.answer_format), "rules"
        ok = s >= self.threshold
        why = f"{src} score {s:.2f} {'>=' if ok else '<'} {self.threshold}: {item.final_answer!r} vs {task.answer!r}"
        return verdict(item, self.name, ok, why, s)


@dataclass
class RetrievalCompleteness(KeepPassed):
    """Every gold evidence page was retrieved (shown) during the episode (VISOR)."""

    name: str = "retrieval_completeness"

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        gold = ctx.task(item).evidence_pages
        if not gold:
            return verdict(item, self.name, True, "task has no gold pages", 1.0)
        seen = set(item.retrieved_pages) | set(item.selected_pages)
        missing = [p for p in gold if p not in seen]
        share = 1 - len(missing) / len(gold)
        if missing:
            return verdict(item, self.name, False, f"gold pages never retrieved: {missing}", share)
        return verdict(item, self.name, True, f"all {len(gold)} gold pages retrieved", share)


@dataclass
class Structure(KeepPassed):
    """Structural validity of the actions (VISOR's SFT filters, generalised).

    - a crop targets a page that an earlier search or selection showed; with `adjacent` the crop must come
      immediately after that retrieval (the previous action is the search/selection, not another crop),
      VISOR's "immediately preceded by a retrieval step" rule;
    - no crop covers (nearly) the whole page: normalised area >= `max_crop_area` (share of the page);
    - crop boxes lie inside the page (raw pixels vs the page size when known, else 0-1000 bounds);
    - at most `max_retrievals` search actions;
    - with `require_valid`, no invalid turns and an answered episode.
    """

    max_crop_area: float = 0.9
    max_retrievals: int = 10
    adjacent: bool = False
    require_valid: bool = True
    name: str = "structure"

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        problems: list[str] = []
        shown: set[str] = set()
        last_retrieval: set[str] = set()  # pages of the latest search/select, kept across crops
        crops_by_turn = {}
        for c in item.crops:
            crops_by_turn.setdefault(c.turn, []).append(c)
        n_search = 0
        prev_kind = ""
        for turn in item.turns:
            a, obs = turn.action, turn.observation
            pages = [im.page_id for im in obs.images if im.box is None] if obs else []
            if a.kind in ("search", "select"):
                n_search += a.kind == "search"
                shown.update(pages)
                last_retrieval = set(pages)
            elif a.kind == "crop":
                if self.adjacent and prev_kind not in ("search", "select"):
                    problems.append(f"turn {turn.idx}: crop not immediately preceded by a retrieval (after {prev_kind or 'nothing'})")
                for c in crops_by_turn.get(turn.idx, []) or []:
                    pool = last_retrieval if self.adjacent else shown
                    if c.page_id not in pool:
                        where = "the preceding retrieval" if self.adjacent else "an earlier search/selection"
                        problems.append(f"turn {turn.idx}: crop of {c.page_id} not shown by {where}")
                    x1, y1, x2, y2 = c.box.norm
                    area = max(0, x2 - x1) * max(0, y2 - y1) / 1e6
                    if area >= self.max_crop_area:
                        problems.append(f"turn {turn.idx}: crop covers {area:.0%} of {c.page_id}")
                    if not self._inside(c.box.raw, ctx.page_sizes.get(c.page_id)):
                        problems.append(f"turn {turn.idx}: crop box {list(c.box.raw)} outside page {c.page_id}")
            elif a.kind not in ("think", "invalid"):
                last_retrieval = set()
            if a.kind not in ("think", "invalid"):
                prev_kind = a.kind
        if n_search > self.max_retrievals:
            problems.append(f"{n_search} retrievals > {self.max_retrievals}")
        if self.require_valid and item.n_invalid:
            problems.append(f"{item.n_invalid} invalid turn(s)")
        if self.require_valid and item.status != "answered":
            problems.append(f"status {item.status}")
        if problems:
            return verdict(item, self.name, False, "; ".join(problems), float(len(problems)))
        return verdict(item, self.name, True, f"{len(item.crops)} crop(s), {n_search} retrieval(s) ok", 0.0)

    @staticmethod
    def _inside(raw: tuple[float, float, float, float], size: tuple[int, int] | None, tol: float = 1.0) -> bool:
        x1, y1, x2, y2 = raw
        if x2 <= x1 or y2 <= y1 or min(raw) < -tol:
            return False
        if size is None:
            return True
        w, h = size
        return x2 <= w + tol and y2 <= h + tol


register_filter(Correctness)
register_filter(RetrievalCompleteness)
register_filter(Structure)
