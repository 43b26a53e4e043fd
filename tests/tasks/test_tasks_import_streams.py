"""A JSON document (a list of rows, or an object whose `examples` list holds them) is read row by row: its first rows
come before its end has been written, memory holds a row at a time whatever the file's size, and the rows are the
ones a whole-file parse gives. JSON lines whose first row is an object still read as lines."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc

import pytest

from tests.support.corpus_records import blank_pdf, record_pdfs
from vrag_data.errors import VragError
from vrag_data.store import Workspace
from vrag_data.tasks import import_tasks, load_tasks
from vrag_data.tasks.reader import read_numbered_rows

CAP, LINE_CAP = 1 << 30, 1 << 20


def _row(i: int, pad: int = 40) -> dict:
    return {"id": f"r{i}", "doc_id": "alpha.pdf", "question": f"What is item {i}? " + "pad " * pad, "answer": str(i),
            "evidence_pages": [1 + i % 5]}


def test_the_first_rows_come_before_the_end_of_the_document_is_written(tmp_path):
    fifo = tmp_path / "rows.json"
    os.mkfifo(fifo)
    first_row_seen = threading.Event()
    end_written = threading.Event()

    def write() -> None:
        with fifo.open("w") as w:
            w.write('{"examples": [\n' + ",\n".join(json.dumps(_row(i)) for i in range(3000)) + ",\n")
            w.flush()
            first_row_seen.wait(timeout=30)  # a reader that waits for the whole file gets it only after this
            w.write(json.dumps(_row(3000)) + "]}\n")
            end_written.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    rows = read_numbered_rows(str(fifo), CAP, LINE_CAP)
    where, row = next(rows)
    seen_before_end = not end_written.is_set()
    first_row_seen.set()
    rest = list(rows)
    writer.join(timeout=30)
    assert (where, row["id"]) == ("row 1", "r0")
    assert seen_before_end  # the first row came while the document's end was not yet written
    assert [w for w, _ in rest][-1] == "row 3001" and rest[-1][1]["id"] == "r3000"


@pytest.mark.parametrize("shape", ["array, one line", "array, pretty", "examples object, one line"])
def test_memory_holds_a_row_at_a_time(tmp_path, shape):
    rows = [_row(i, 100) for i in range(60_000)]
    if shape == "array, one line":
        text = json.dumps(rows)
    elif shape == "array, pretty":
        text = json.dumps(rows, indent=2)
    else:
        text = json.dumps({"version": 1, "examples": rows})
    f = tmp_path / "big.json"
    f.write_text(text)
    size = f.stat().st_size
    assert size > 28 << 20  # 28 to 45 MiB
    del rows, text
    tracemalloc.start()
    try:
        n, last = 0, None
        for where, row in read_numbered_rows(str(f), CAP, LINE_CAP):
            n, last = n + 1, (where, row["id"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (n, last) == (60_000, ("row 60000", "r59999"))
    # a whole-file parse holds the bytes, the text and every row (several times the size); streaming holds a chunk
    assert peak < size / 4, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"


def test_streamed_rows_are_the_rows_and_a_broken_document_stops_with_one_line(tmp_path):
    ws = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(ws, [blank_pdf(tmp_path / "alpha.pdf", 5)])
    f = tmp_path / "qa.json"
    f.write_text(json.dumps({"examples": [_row(i) for i in range(5)], "data": "not rows"}, indent=1))
    s = import_tasks(str(f), ws, "corpus")
    assert (s.rows, s.imported, s.skipped) == (5, 5, 0)
    assert sorted(t.source_id for t in load_tasks(ws)) == [f"r{i}" for i in range(5)]
    # a document cut inside a row: one line, nothing imported from it
    cut = tmp_path / "cut.json"
    whole = json.dumps([_row(i) for i in range(10, 15)])
    cut.write_text(whole[: len(whole) * 3 // 4])  # inside row 4
    with pytest.raises(VragError) as err:
        import_tasks(str(cut), ws, "corpus")
    assert "cut.json" in str(err.value) and "not valid JSON" in str(err.value) and "\n" not in str(err.value)
    assert sorted(t.source_id for t in load_tasks(ws)) == [f"r{i}" for i in range(5)]


def test_json_lines_starting_with_an_object_still_read_as_lines(tmp_path):
    f = tmp_path / "qa.jsonl"
    f.write_text("\n".join([json.dumps(_row(0)), "{not json", json.dumps(_row(2))]) + "\n")
    got = [(w, r if isinstance(r, dict) else type(r).__name__) for w, r in read_numbered_rows(str(f), CAP, LINE_CAP)]
    assert [w for w, _ in got] == ["line 1", "line 2", "line 3"]
    assert got[0][1]["id"] == "r0" and got[1][1] == "RowError" and got[2][1]["id"] == "r2"
    # a single object over several lines is one row
    g = tmp_path / "one.json"
    g.write_text(json.dumps(_row(7), indent=2))
    assert [(w, r["id"]) for w, r in read_numbered_rows(str(g), CAP, LINE_CAP)] == [("row 1", "r7")]


def test_an_import_holds_a_batch_of_tasks_not_the_files(tmp_path, monkeypatch):
    import vrag_data.tasks.importers as importers

    ws = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(ws, [blank_pdf(tmp_path / "alpha.pdf", 5)])
    f = tmp_path / "qa.json"
    f.write_text(json.dumps([_row(i, 600) for i in range(5_000)]))  # 5000 rows of 2.5 KB
    size = f.stat().st_size
    monkeypatch.setattr(importers, "BATCH", 500, raising=False)  # the shard is written 500 tasks at a time
    tracemalloc.start()
    try:
        s = import_tasks(str(f), ws, "corpus")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (s.rows, s.imported, s.skipped, s.added) == (5_000, 5_000, 0, 5_000)
    tasks = load_tasks(ws)
    assert len(tasks) == 5_000 and {t.source_id for t in tasks} == {f"r{i}" for i in range(5_000)}
    # holding every task (and the parsed file) takes several times the file's size; a batch at a time, far less
    assert peak < size, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"
