"""A symlink that loops (`x.pdf -> x.pdf`, a cycle of links, a folder linking to its parent) names no file: the ingest
records one line naming it and goes on with the other documents, without a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pymupdf
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.ingest import IngestOptions, ingest_paths
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents, load_errors

FAST = IngestOptions(layout="off", ocr="off", workers=1)


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    doc = pymupdf.open()
    doc.new_page(width=300, height=200).insert_text((20, 50), "revenue 42", fontsize=9)
    doc.save(d / "good.pdf")
    os.symlink("x.pdf", d / "x.pdf")  # loops on itself
    os.symlink("b", d / "a.pdf")  # a.pdf -> b -> a.pdf
    os.symlink("a.pdf", d / "b")
    os.symlink("..", d / "sub" / "up")  # a cycle of folders: in/sub/up/sub/up/...
    os.symlink("../sub", d / "sub" / "loop.pdf")  # a folder link named like a PDF, inside the cycle
    return d


def test_loops_are_one_line_each_and_the_good_document_is_ingested(tmp_path):
    d = _folder(tmp_path)
    ws = Workspace(str(tmp_path / "ws"))
    s = ingest_paths([str(d)], ws, FAST, progress=False)
    assert (s.n_docs, s.n_pages) == (1, 1)
    assert [doc.stem for doc in load_documents(ws)] == ["good"]
    errors = {Path(e.path).name: e.reason for e in load_errors(ws)}
    assert set(errors) == {"x.pdf", "a.pdf"}
    assert all("symlink loop" in why and "\n" not in why for why in errors.values())


def test_a_looping_link_named_on_the_command_line_is_skipped_and_the_others_go_on(tmp_path):
    d = _folder(tmp_path)
    r = CliRunner().invoke(app, ["ingest", str(d / "x.pdf"), str(d / "good.pdf"), "-w", str(tmp_path / "ws"),
                                 "--layout", "off", "--ocr", "off", "--workers", "1", "-q"], env={"COLUMNS": "200"})
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 0 and "Traceback" not in r.stderr
    assert "ingested 1 document(s)" in r.stderr
    lines = [line for line in r.stderr.splitlines() if "x.pdf" in line]
    assert len(lines) == 1 and "symlink loop" in lines[0]
