"""Issue 52, wrong gold found on the final code's held-out round (round 12, set BP): a paper's table prints
J_cachegrowth = 2^17 with the exponent set in superscript, its text layer reads "217", and the question's gold was
217. A value that holds a power its page sets in superscript is not asked (the PDF's span flags say which digits
are raised). Fails on the code of round 12."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from tests.qgen.test_qgen_tables import _region
from vrag_data.qgen.evidence import Evidence
from vrag_data.qgen.oracle_writer import OracleWriter
from vrag_data.qgen.powers import flattened_powers
from vrag_data.qgen.writer import Attempt, Written

TABLE = ("| Name | Value | Description |\n|---|---|---|\n| Cache growth | 217 | Bytes added per epoch |\n"
         "| Epoch length | 30000 | Blocks per epoch |\n| Parents | 256 | Parents of each item |")


def _pdf(tmp: Path) -> str:
    doc = pymupdf.open()
    page = doc.new_page()
    y = 100
    for name, base, sup, note in (("Cache growth", "2", "17", "Bytes added per epoch"),
                                  ("Epoch length", "30000", "", "Blocks per epoch"),
                                  ("Parents", "256", "", "Parents of each item")):
        page.insert_text((72, y), name, fontsize=10)
        page.insert_text((200, y), base, fontsize=10)
        if sup:  # the exponent raised and smaller: PyMuPDF flags the span as superscript
            page.insert_text((200 + pymupdf.get_text_length(base, fontsize=10), y - 4), sup, fontsize=6)
        page.insert_text((300, y), note, fontsize=10)
        y += 20
    path = tmp / "eth.pdf"
    doc.save(path)
    return str(path)


def test_a_value_holding_a_power_set_in_superscript_is_not_asked(tmp_path: Path) -> None:
    pdf = _pdf(tmp_path)
    assert flattened_powers(pdf, 1) == frozenset({"217"})
    region = _region(TABLE, stem="eth", page=1, title="Ethash parameters")
    w = OracleWriter({}, {"eth": "\u201cEthereum: a secure decentralised ledger\u201d"}, pdfs={"eth": pdf})
    outs = [w.write_sync(Attempt(i, Evidence("single", (region,)), "extraction")) for i in range(30)]
    answers = {o.answer for o in outs if isinstance(o, Written)}
    assert answers and "217" not in answers, answers
    # without the source PDF (a moved file) nothing tells the power apart: the plain text is all there is
    assert flattened_powers(str(tmp_path / "moved.pdf"), 1) == frozenset()


def test_source_pdfs_not_where_ingest_read_them_are_named_in_a_notice(tmp_path: Path) -> None:
    from vrag_data.qgen.generate import moved_sources
    from vrag_data.schema.records import Document

    here = _pdf(tmp_path)

    def doc(stem: str, path: str) -> Document:
        return Document(doc_id=f"sha_{stem}", stem=stem, source_path=path, kind="pdf", n_pages=1, n_bytes=10)

    assert moved_sources({"eth": doc("eth", here)}) == []
    notes = moved_sources({"eth": doc("eth", here), "fees": doc("fees", str(tmp_path / "gone" / "fees.pdf"))})
    assert len(notes) == 1 and notes[0].startswith("1 source PDF(s) are not where ingest read them (fees)")
    assert "superscript powers are not read" in notes[0] and "put the PDFs back" in notes[0]
