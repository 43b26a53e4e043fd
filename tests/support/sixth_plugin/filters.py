"""Its filter: keeps a trajectory whose final answer the checker confirmed."""

from dataclasses import dataclass

from vrag_data.filters import FilterContext, KeepPassed, register_filter, verdict
from vrag_data.schema.records import Trajectory, Verdict


@dataclass
class CheckerAgreed(KeepPassed):
    name: str = "checker_agreed"

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        notes = item.extra.get("checker") or []
        ok = bool(notes) and all(n.get("agrees") for n in notes)
        return verdict(item, self.name, ok, f"checker: {notes[-1]['reply'][:60] if notes else 'never asked'}")


register_filter(CheckerAgreed)
