"""What a generation run asked for and kept, per kind and per document, and the kinds that fell under their share.

`tasks generate` asks for kinds in turn (single, multi_page, cross_doc): each requested kind is owed an equal share
of --n, and is short when it keeps fewer than floor(min_share x share) tasks. A kind no attempt could be made for
(no usable region) is asked 0 times and kept 0 times: it is short, as one that was tried and always declined.
"target_met" (verified, but --n was already met) is no cause of a shortfall and is not named as one."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from vrag_data.qgen.evidence import EvidencePool
    from vrag_data.schema.records import Page


class Tally(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requested: list[str] = Field(default_factory=list)  # kinds asked for, before any was found impossible
    asked_by_kind: dict[str, int] = Field(default_factory=dict)  # attempts per kind
    kept_by_kind: dict[str, int] = Field(default_factory=dict)  # tasks toward --n (new or found again) per kind
    asked_by_doc: dict[str, int] = Field(default_factory=dict)  # attempts whose evidence is on the document
    kept_by_doc: dict[str, int] = Field(default_factory=dict)
    rejected_by_kind: dict[str, dict[str, int]] = Field(default_factory=dict)  # kind -> reason -> attempts
    rejected_by_doc: dict[str, dict[str, int]] = Field(default_factory=dict)  # stem -> reason -> attempts
    unusable: dict[str, str] = Field(default_factory=dict)  # stem -> why no attempt could use the document
    documents: list[str] = Field(default_factory=list)  # every document of the workspace

    def ask(self, kind: str, stems: list[str]) -> None:
        _add(self.asked_by_kind, [kind])
        _add(self.asked_by_doc, sorted(set(stems)))

    def keep(self, kind: str, stems: list[str]) -> None:
        _add(self.kept_by_kind, [kind])
        _add(self.kept_by_doc, sorted(set(stems)))

    def reject(self, pairs: list[tuple[str, str]]) -> None:
        """(kind, reason) of each rejected attempt."""
        for (kind, reason), k in sorted(Counter(pairs).items()):
            self.rejected_by_kind.setdefault(kind, {})[reason] = self.rejected_by_kind.get(kind, {}).get(reason, 0) + k

    def reject_docs(self, pairs: list[tuple[str, str]]) -> None:
        """(document stem, reason) of each rejected attempt, once per document it drew on."""
        for (stem, reason), k in sorted(Counter(pairs).items()):
            by = self.rejected_by_doc.setdefault(stem, {})
            by[reason] = by.get(reason, 0) + k

    def why_empty(self) -> list[str]:
        """Every document that gave no task, with why: never usable (no text layer, no table ...) or the largest
        causes of its rejected attempts."""
        out = [f"{d} (not attempted: {why})" for d, why in sorted(self.unusable.items())]
        out += [f"{d} (drawn, but the writer could write for none of its regions)" for d in sorted(self.documents)
                if d not in self.unusable and d not in self.asked_by_doc]
        for d in self.empty_docs():
            causes = sorted((self.rejected_by_doc.get(d) or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:2]
            out.append(f"{d} ({', '.join(f'{r} {k}' for r, k in causes) or 'no attempt kept'})")
        return out

    def short_kinds(self, target: int, floor: float) -> list[str]:
        """One phrase per requested kind kept under `floor` x its share of `target`, with its largest causes."""
        if not self.requested:
            return []
        share = target / len(self.requested)
        out = []
        for kind in self.requested:
            kept, asked = self.kept_by_kind.get(kind, 0), self.asked_by_kind.get(kind, 0)
            if kept >= math.floor(floor * share + 1e-9):
                continue
            causes = sorted(((r, k) for r, k in self.rejected_by_kind.get(kind, {}).items() if r != "target_met"),
                            key=lambda kv: (-kv[1], kv[0]))[:3]
            why = ", ".join(f"{r} {k}" for r, k in causes) or "no usable evidence region, never tried"
            out.append(f"{kind} kept {kept} of {asked} asked (share {share:g} of --n {target}; causes: {why})")
        return out

    def per_kind_line(self) -> str:
        kinds = [*self.requested, *(k for k in self.asked_by_kind if k not in self.requested)]
        return ", ".join(f"{k} {self.kept_by_kind.get(k, 0)}/{self.asked_by_kind.get(k, 0)}" for k in kinds) or "none"

    def empty_docs(self) -> list[str]:
        """Documents some attempt used that gave no task."""
        return sorted(d for d in self.asked_by_doc if not self.kept_by_doc.get(d))


def _add(counts: dict[str, int], keys: list[str]) -> None:
    for k in keys:
        counts[k] = counts.get(k, 0) + 1


def unusable_documents(docs: Mapping[str, object], pages: Mapping[str, "Page"], pool: "EvidencePool") -> dict[str, str]:
    """The documents no attempt can use, with why: no text layer on any page (a scan the OCR read nothing from),
    or no region the writer can write for (no table, and no text it reads)."""
    text = Counter(p.stem for p in pages.values() if p.text.strip())
    out = {}
    for stem in docs:
        if stem in pool.by_doc:
            continue
        out[stem] = "no text layer" if not text.get(stem) else "no table or text region the writer can use"
    return out
