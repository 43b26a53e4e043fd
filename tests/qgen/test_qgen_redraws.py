"""A region of a few cells asked again in one run gives its other cells, not the same question: the offline writer
draws again when its question was given before (a near-duplicate took most of the attempt budget of held-out sets,
while cells of the same tables went unasked). The first answer of a fresh writer is unchanged (idempotent re-runs)."""

from __future__ import annotations

import asyncio

from tests.qgen.test_qgen_tables import _region
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.writer import Attempt, Written

FEES = ("| Item | Fee |\n|---|---|\n| Registration | 1,250 |\n| Field trip | 830 |\n| Laboratory | 415 |\n"
        "| Library | 260 |")
LABEL = "\u201cCourse fees 2026\u201d"


def _questions(n: int) -> list[str]:
    region = _region(FEES, stem="fees", page=2, title="Course fees")
    w = OracleWriter({}, {"fees": LABEL})

    async def run() -> list[str]:
        outs = [await w.write(Attempt(i, Evidence("single", (region,)), "extraction")) for i in range(n)]
        return [o.question for o in outs if isinstance(o, Written)]
    return asyncio.run(run())


def test_four_attempts_on_a_table_of_four_cells_ask_four_cells() -> None:
    asked = _questions(4)
    assert len(asked) == 4 and len(set(asked)) == 4, asked
    assert {q.split(" value of ")[-1].rstrip("?") for q in asked} == {"Registration", "Field trip", "Laboratory", "Library"}


def test_a_fresh_writer_gives_the_same_first_questions() -> None:
    assert _questions(3) == _questions(3)
