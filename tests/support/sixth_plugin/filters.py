"""Its filter: keeps a trajectory whose final answer the checker confirmed (what the recipe records, `CHECKS`)."""

from dataclasses import dataclass

from vrag_data.filters import FilterContext, KeepPassed, register_filter, verdict
from vrag_data.recipe import ExtraKey
from vrag_data.schema.records import Trajectory, Verdict

CHECKS = ExtraKey("checker", dict, "each time the checker was asked: its reply and whether it agrees", note=True)


@dataclass
class CheckerAgreed(KeepPassed):
    name: str = "checker_agreed"

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        notes = CHECKS.read(item.extra) or []
        ok = bool(notes) and all(n.get("agrees") for n in notes)
        return verdict(item, self.name, ok, f"checker: {notes[-1]['reply'][:60] if notes else 'never asked'}")


register_filter(CheckerAgreed)
