"""Bad inputs: each gets a one-line error in corpus/errors.parquet and the batch goes on; exit codes."""

from __future__ import annotations

import os
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from typer.testing import CliRunner, Result

from vrag_data.cli.main import app
from vrag_data.ingest import IngestFailed, IngestOptions, ingest_paths
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_documents, load_errors, load_pages

FAST = IngestOptions(layout="off", ocr="off", workers=1)


def _good_pdf(path: Path, pages: int = 2, size: tuple[float, float] = (300, 200)) -> Path:
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=size[0], height=size[1])
        page.insert_text((20, 50), f"Quarterly revenue grew on page {i + 1} of this test document.", fontsize=9)
    doc.save(path)
    return path


@pytest.fixture()
def bad_dir(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    good = _good_pdf(d / "good.pdf")
    enc = pymupdf.open(good)
    enc.save(d / "locked.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    data = good.read_bytes()
    (d / "cut.pdf").write_bytes(data[:200])  # truncated before any page object
    (d / "zero.pdf").write_bytes(  # a valid PDF with an empty page tree (PyMuPDF refuses to save one)
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
        b"trailer<</Root 1 0 R>>\n%%EOF\n")
    (d / "notes.pdf").write_text("meeting notes, not a PDF\n" * 10)
    (d / "empty.pdf").write_bytes(b"")
    return d


def _reasons(ws: Workspace) -> dict[str, str]:
    return {Path(e.path).name: e.reason for e in load_errors(ws)}


def test_bad_files_are_recorded_and_the_good_one_is_ingested(bad_dir, tmp_path):
    ws = Workspace(str(tmp_path / "ws"))
    s = ingest_paths([str(bad_dir)], ws, FAST, progress=False)
    assert (s.n_docs, s.n_pages) == (1, 2)
    reasons = _reasons(ws)
    assert set(reasons) == {"locked.pdf", "cut.pdf", "zero.pdf", "notes.pdf", "empty.pdf"}
    assert "encrypted" in reasons["locked.pdf"]
    assert "not a PDF" in reasons["notes.pdf"]
    assert "no pages" in reasons["zero.pdf"]
    assert "damaged or truncated" in reasons["cut.pdf"] and str(bad_dir) not in reasons["cut.pdf"]
    assert "empty" in reasons["empty.pdf"]
    assert all("\n" not in r for r in reasons.values())
    assert [d.stem for d in load_documents(ws)] == ["good"]
    # a second run keeps the errors once (no duplicates) and skips the good file
    s2 = ingest_paths([str(bad_dir)], ws, FAST, progress=False)
    assert (s2.n_docs, s2.n_skipped_unchanged) == (0, 1)
    assert len(load_errors(ws)) == 5


def test_page_too_large_is_a_page_error_and_the_rest_of_the_document_stays(tmp_path):
    doc = pymupdf.open()
    doc.new_page(width=300, height=200).insert_text((20, 50), "normal page")
    doc.new_page(width=14000, height=14000)  # 28000 x 28000 px at 144 dpi
    doc.save(tmp_path / "poster.pdf")
    ws = Workspace(str(tmp_path / "ws"))
    s = ingest_paths([str(tmp_path / "poster.pdf")], ws, FAST, progress=False)
    assert (s.n_docs, s.n_pages) == (1, 1)
    (err,) = load_errors(ws)
    assert err.page == 2 and err.stage == "render" and "max_page_pixels" in err.reason
    assert [p.page_id for p in load_pages(ws)] == ["poster_1"]
    assert not (Path(ws.root) / "pages" / "poster_2.jpg").exists()
    with pytest.raises(IngestFailed, match="max_page_pixels"):
        ingest_paths([str(tmp_path / "poster.pdf")], Workspace(str(tmp_path / "ws2")), FAST.model_copy(update={"strict": True}), progress=False)


def test_image_input_becomes_a_one_page_document(tmp_path):
    img = Image.new("RGB", (640, 360), "white")
    img.save(tmp_path / "scan.png", dpi=(200, 200))
    ws = Workspace(str(tmp_path / "ws"))
    s = ingest_paths([str(tmp_path / "scan.png")], ws, FAST, progress=False)  # OCR is covered on the slide deck
    assert s.n_docs == 1
    (doc,) = load_documents(ws)
    (page,) = load_pages(ws)
    assert (doc.kind, doc.n_pages, page.page_id, page.width, page.height, page.dpi) == ("image", 1, "scan_1", 640, 360, 200)
    assert Image.open(Path(ws.root) / page.image).size == (640, 360)


def _cli(*args: str) -> Result:
    """The real `vrag-data` app, in process (a subprocess per call costs seconds of imports)."""
    result = CliRunner().invoke(app, ["ingest", *args], env={"COLUMNS": "200"})
    # an expected failure ends in SystemExit with a message, never in an uncaught exception
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.mark.slow
def test_cli_exit_codes(bad_dir, tmp_path):
    ws = str(tmp_path / "ws")
    ok = _cli(str(bad_dir), "-w", ws, "--layout", "off", "--ocr", "off", "--workers", "1", "-q")
    assert ok.exit_code == 0, ok.stderr
    assert "ingested 1 document(s)" in ok.stderr and "locked.pdf" in ok.stderr
    none = _cli(str(bad_dir / "notes.pdf"), str(bad_dir / "locked.pdf"), "-w", str(tmp_path / "ws2"), "--workers", "1", "--layout", "off", "-q")
    assert none.exit_code == 2 and "ingested 0 document(s)" in none.stderr
    strict = _cli(str(bad_dir), "-w", str(tmp_path / "ws3"), "--layout", "off", "--ocr", "off", "--workers", "1", "--strict", "-q")
    assert strict.exit_code == 2 and "error:" in strict.stderr and "strict" in strict.stderr
    usage = _cli(str(bad_dir), "-w", ws, "--layout", "magic", "--bogus")
    assert usage.exit_code == 2 and "Traceback" not in usage.stderr and "No such option" in usage.stderr
    missing = _cli(str(tmp_path / "nope.pdf"), "-w", ws)
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr
    assert "nope.pdf: no such file" in missing.stderr


def test_cli_names_the_missing_external_tool(tmp_path, monkeypatch):
    good = _good_pdf(tmp_path / "good.pdf")
    for var in ("VRAG_MINERU_PYTHON", "VRAG_MINERU_URL"):
        monkeypatch.delenv(var, raising=False)
    r = _cli(str(good), "-w", str(tmp_path / "ws"), "--layout", "mineru")
    assert r.exit_code == 2 and "--layout pymupdf" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "ws" / "pages").exists() or not os.listdir(tmp_path / "ws" / "pages")  # failed before any work


def test_mineru_flash_end_to_end(shared_corpus, tmp_path):
    """Drives the real MinerU adapter; needs MinerU installed in its own environment."""
    python = os.environ.get("VRAG_MINERU_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("MinerU not installed: set VRAG_MINERU_PYTHON to the python of an environment with `mineru` (4.x)")
    ws = Workspace(str(tmp_path / "ws"))
    opts = IngestOptions(layout="mineru", ocr="off", max_pages=6, workers=1)
    s = ingest_paths([str(shared_corpus / "docs" / "Independents-Report.pdf")], ws, opts, progress=False)
    assert [e for e in s.errors if e.stage != "notice"] == [] and s.n_pages == 6
    from vrag_data.store.corpus import load_layout

    blocks = [b for b in load_layout(ws) if b.source == "mineru"]
    assert {"text", "title", "figure", "header"} <= {b.cls for b in blocks}
    page6 = [b for b in blocks if b.page == 6]
    assert any("Trump" in b.text for b in page6)
    assert all(0 <= b.bbox.raw[2] <= 1224 and 0 <= b.bbox.raw[3] <= 1584 for b in blocks)


def test_symlinks_out_of_the_input_folder_are_not_followed(tmp_path):
    import os
    import shutil

    from vrag_data.ingest.discover import discover_inputs

    folder, outside = tmp_path / "in", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    import fitz

    doc = fitz.open()
    doc.new_page().insert_text((72, 72), "inside")
    doc.save(folder / "inside.pdf")
    shutil.copy(folder / "inside.pdf", outside / "secret.pdf")
    os.symlink(outside / "secret.pdf", folder / "link.pdf")
    os.symlink("/etc/passwd", folder / "passwd.pdf")
    os.symlink(folder / "inside.pdf", folder / "alias.pdf")  # inside the folder: fine (and de-duplicated)
    skipped: list = []
    found = discover_inputs([str(folder)], skipped=skipped)
    assert found == [str((folder / "inside.pdf").resolve())]
    assert sorted(os.path.basename(p) for p, _ in skipped) == ["link.pdf", "passwd.pdf"]
    assert all("--follow-symlinks" in why for _, why in skipped)
    assert str((outside / "secret.pdf").resolve()) in discover_inputs([str(folder)], follow_symlinks=True)


def test_a_non_utf8_file_name_is_recorded_and_the_batch_goes_on(tmp_path):
    import os
    import shutil

    import fitz

    from vrag_data.ingest import IngestOptions, ingest_paths
    from vrag_data.schema.records import IngestError
    from vrag_data.store import Workspace, read_records

    folder = tmp_path / "in"
    folder.mkdir()
    doc = fitz.open()
    doc.new_page().insert_text((72, 72), "revenue 42")
    doc.save(folder / "good.pdf")
    shutil.copy(folder / "good.pdf", os.path.join(str(folder), os.fsdecode(b"bad\xff\xfename.pdf")))
    ws = Workspace(str(tmp_path / "ws"))
    summary = ingest_paths([str(folder)], ws, IngestOptions(ocr="off", workers=1), progress=False)
    assert summary.n_docs == 1
    (err,) = [e for e in summary.errors if e.stage != "notice"]
    assert err.path.endswith("bad\\xff\\xfename.pdf") and "not valid UTF-8" in err.reason
    stored = read_records(ws.corpus_table("errors").rsplit("/", 1)[0] + "/errors.parquet", IngestError)
    assert any("not valid UTF-8" in e.reason for e in stored)


@pytest.mark.slow
def test_a_killed_ingest_keeps_the_error_rows_already_found(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import fitz

    from vrag_data.schema.records import IngestError
    from vrag_data.store import Workspace, read_records

    folder = tmp_path / "in"
    folder.mkdir()
    # Larger than the long document, so the batch (biggest first) meets it before the long one: its row must be
    # on disk while the long document is still being ingested.
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a pdf body\n" + b"x" * 1_000_000)
    doc = fitz.open()
    for i in range(400):
        doc.new_page().insert_text((72, 72), f"page {i} revenue table")
    doc.save(folder / "long.pdf")
    ws = tmp_path / "ws"
    exe = os.path.join(os.path.dirname(sys.executable), "vrag-data")
    proc = subprocess.Popen([exe, "ingest", str(folder), "-w", str(ws), "--ocr", "off", "--layout", "off", "--workers", "1", "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    errors = Workspace(str(ws)).corpus_table("errors")

    def broken_row_written() -> bool:
        try:
            return any(r.path.endswith("broken.pdf") for r in read_records(errors, IngestError))
        except Exception:  # noqa: BLE001 - not there yet
            return False

    deadline = time.time() + 240  # the CLI's imports alone take a minute on a loaded two-core machine
    while time.time() < deadline and not broken_row_written() and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the ingest ended before it could be killed: make the long document longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert broken_row_written()  # written when found, not at the end of the batch


def test_a_pdf_repaired_on_open_is_kept_and_said_as_a_note_not_a_skip(tmp_path):
    import re as _re

    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Annual report of the garden club with 12 members.", fontsize=11)
    raw = _re.sub(rb"startxref\s+\d+", b"startxref\n999999", doc.tobytes(garbage=0, deflate=False))  # a broken xref
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "club.pdf").write_bytes(raw)
    out = _cli(str(tmp_path / "in"), "-w", str(tmp_path / "ws"), "--layout", "off", "--ocr", "off", "--workers", "1", "-q")
    assert out.exit_code == 0, out.stderr
    text = " ".join(out.stderr.split())
    assert "ingested 1 document(s), 1 page(s)" in text and "0 error(s), 1 notice(s)" in text, text
    assert "note " in text and "repaired on open and kept" in text and "skipped" not in text, text
