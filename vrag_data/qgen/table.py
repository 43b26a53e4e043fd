"""A table of a page as question generation reads it: its grid, the document it is in, its title and scale."""

from __future__ import annotations

from dataclasses import dataclass

from vrag_data.qgen.codes import code_column
from vrag_data.qgen.cells import quantity
from vrag_data.qgen.grid import Grid
from vrag_data.qgen.naming import describe


@dataclass(frozen=True)
class Table:
    grid: Grid
    label: str  # the document's readable name
    region: int  # index of the evidence region
    scale: float | None = None  # the scale its amounts are stated in (1e6: "in millions"), None when not known
    above: str = ""  # the page lines right above the table (its title, period and unit lines)
    title: str = ""  # its printed title, named in questions across documents
    page_items: frozenset[str] = frozenset()  # the line items its page prints (`statement_items.page_concepts`)

    @property
    def where(self) -> str:
        return describe(self.grid, self.label, self.title, self.scale)

    @property
    def named(self) -> str:
        """`where` without the document (a question that names the document once)."""
        return describe(self.grid, "", self.title, self.scale)

    def numbers(self, col: str) -> list[tuple[str, float, str]]:
        """(row, number, printed value) of a column, in row order."""
        if code_column(col, [v for _, c, v in self.grid.cells if c == col]):  # codes, years, phone numbers
            return []
        out = []
        for r, c, v in self.grid.cells:
            n = quantity(v)
            if c == col and n is not None:
                out.append((r, n, v))
        return out
