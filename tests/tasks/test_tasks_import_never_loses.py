"""`tasks import` never loses or blocks data: files of the same name add up, no file name can take the workspace's
own error log, a bad row of any kind is one reported line (never a traceback), an endless or huge input stops with
one line in bounded memory, and re-importing a file adds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.corpus_records import blank_pdf, record_pdfs
from vrag_data.cli.main import app
from vrag_data.ids import task_id
from vrag_data.schema.records import Task
from vrag_data.store import Workspace, write_records
from vrag_data.tasks import load_import_errors, load_tasks

CLI = [sys.executable, "-c", "from vrag_data.cli.main import app; app()"]


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    docs = tmp_path / "docs"
    docs.mkdir()
    w = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(w, [blank_pdf(docs / "alpha.pdf", 5), blank_pdf(docs / "beta.pdf", 3)])
    return w


def _row(rid: str, question: object, doc: str = "alpha.pdf", page: object = 1, **more: object) -> dict:
    return {"id": rid, "doc_id": doc, "question": question, "answer": "x", "evidence_pages": [page], **more}


def _jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _import(ws: Workspace, file: Path | str, *args: str) -> tuple[int, list[str]]:
    res = CliRunner().invoke(app, ["tasks", "import", str(file), "-w", ws.root, *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)  # never a traceback
    return res.exit_code, [line for line in res.output.splitlines() if line.strip()]


def _two_qa_files(tmp_path: Path) -> tuple[Path, Path]:
    a = _jsonl(tmp_path / "bench_a" / "qa.jsonl", [_row("1", "Q1?"), _row("2", "Q2?"), _row("3", "Q3?")])
    # the same question on the same document as a's first row: a task of its own, from its own source
    b = _jsonl(tmp_path / "bench_b" / "qa.jsonl", [_row("1", "Q1?"), _row("9", "Q9?", "beta.pdf")])
    return a, b


def test_two_files_of_the_same_name_add_up(ws: Workspace, tmp_path: Path) -> None:
    a, b = _two_qa_files(tmp_path)
    assert _import(ws, a)[0] == 0 and len(load_tasks(ws)) == 3
    code, lines = _import(ws, b)
    assert code == 0 and len(load_tasks(ws)) == 5, lines  # 3 + 2: the second qa.jsonl replaced nothing
    assert "2 new" in lines[-1] and "the workspace holds 5 tasks" in lines[-1]
    q1 = [t for t in load_tasks(ws) if t.question == "Q1?"]
    assert len(q1) == 2 and len({t.task_id for t in q1}) == 2
    shards = sorted(p.name for p in Path(ws.tasks).glob("qa-*.parquet"))
    assert len(shards) == 2, shards


def test_a_file_named_import_errors_imports_and_later_imports_still_work(ws: Workspace, tmp_path: Path) -> None:
    named = _jsonl(tmp_path / "import_errors.jsonl", [_row("e", "QE?"), _row("bad", "QB?", "missing.pdf")])
    code, lines = _import(ws, named)
    assert code == 0 and "imported 1 of 2 rows" in lines[-1], lines
    a, _ = _two_qa_files(tmp_path)
    code, lines = _import(ws, a)
    assert code == 0 and "imported 3 of 3 rows" in lines[-1], lines
    assert len(load_tasks(ws)) == 4
    assert [Path(e.path).name for e in load_import_errors(ws)] == ["import_errors.jsonl"]
    assert (Path(ws.tasks) / "import_errors.parquet").is_file()  # the workspace's own log, holding error records


def test_a_workspace_left_by_the_earlier_naming_keeps_every_task_once(ws: Workspace, tmp_path: Path) -> None:
    """An earlier version wrote `tasks/<stem>.parquet` with ids that left out the source, and a user's
    `import_errors.jsonl` over the error log: re-importing keeps every task, each once."""
    a, _ = _two_qa_files(tmp_path)
    doc = {d.stem: d.doc_id for d in record_pdfs(ws, [tmp_path / "docs" / "alpha.pdf"])}["alpha"]

    def old(q: str) -> Task:
        return Task(task_id=task_id([doc], q), question=q, answer="x", doc_ids=[doc], doc_stems=["alpha"],
                    evidence_pages=["alpha_1"], benchmark="corpus")

    write_records(f"{ws.tasks}/qa.parquet", [old("Q1?"), old("Q2?"), old("Q3?")], Task)
    write_records(f"{ws.tasks}/import_errors.parquet", [old("QE?")], Task)
    code, lines = _import(ws, a)
    assert code == 0 and any("replaced" in line and "qa.parquet" in line for line in lines), lines
    assert sorted(t.question for t in load_tasks(ws)) == ["Q1?", "Q2?", "Q3?", "QE?"]
    assert load_import_errors(ws) == []


BAD_ROWS: dict[str, object] = {
    "a JSON list": [1, 2],
    "a JSON number": 5,
    "a JSON string": "just text",
    "a null question": _row("null-q", None),
    "a numeric question": _row("num-q", 42),
    "a nested object answer": {**_row("dict-a", "Dict answer?"), "answer": {"a": {"b": 1}}},
    "a page given as text": _row("page-abc", "Page abc?", page="abc"),
    "a negative page": _row("page-neg", "Negative page?", page=-1),
    "an endless question": _row("long-q", "L" * 20_000 + "?"),
    "a box that is not an object": _row("box-str", "Box?", extra={"evidence_boxes": ["x"]}),
    "a box of letters": _row("box-abc", "Box2?", extra={"evidence_boxes": [{"page": 1, "bbox": "abcd"}]}),
    "extra as a list": _row("extra-list", "Extra?", extra=[1]),
    "an infinite page": _row("page-inf", "Inf?", extra={"evidence_boxes": [{"page": 1e999, "bbox": [1, 2, 3, 4]}]}),
    "an id with a newline and markup": _row("nl\nid [/]", "Newline id?", "missing.pdf"),
    "a lone surrogate": _row("surrogate", "Half \ud800 a pair?"),
}
RAW_BAD_LINES: dict[str, bytes] = {
    "not JSON": b"{not json",
    "a 5000-digit number": b'{"id": "big", "question": ' + b"1" * 5000 + b"}",
    "a deep nest": b"[" * 50_000,
    "a non-UTF-8 byte": b'{"id": "latin1", "doc_id": "alpha.pdf", "question": "caf\xe9?", "answer": "x", "evidence_pages": [1]}',
    "a line over the line cap": json.dumps(_row("huge", "Huge?", extra={"pad": "p" * 100_000})).encode(),
}


def test_each_bad_row_is_one_reported_line_and_the_good_rows_import(ws: Workspace, tmp_path: Path) -> None:
    good = [_row("g1", "Good one?"), _row("g2", "Good two?", "beta.pdf", 3), _row("g3", "Good three?", page=5)]
    lines = [json.dumps(good[0]).encode()]
    lines += [json.dumps(r).encode() for r in BAD_ROWS.values()]
    lines += [json.dumps(good[1]).encode(), json.dumps(good[0]).encode()]  # a duplicate of g1
    lines += list(RAW_BAD_LINES.values())
    lines += [json.dumps(good[2]).encode()]
    f = tmp_path / "hostile.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    code, out = _import(ws, f, "--max-line-bytes", "65536")
    n_bad = len(BAD_ROWS) + len(RAW_BAD_LINES)
    skipped = [line for line in out if line.startswith("skipped ")]
    assert code == 0, out
    assert len(skipped) == n_bad, "\n".join(out)  # each bad row on one line of its own
    assert all(line.startswith("skipped hostile.jsonl line ") and len(line) < 400 for line in skipped), skipped
    assert f"imported 3 of {len(lines)} rows" in out[-1] and f"skipped {n_bad}, duplicates 1" in out[-1], out[-1]
    assert sorted(t.source_id for t in load_tasks(ws)) == ["g1", "g2", "g3"]
    text = "\n".join(skipped)
    for needle in ("expected a JSON object, got list", "expected a JSON object, got int", "missing field 'question'",
                   "'question' must be text, got int", "'answer' must be text", "list of page numbers",
                   "page -1 of 'alpha.pdf' is out of range", "'question' is 20001 characters long",
                   "must be a list of objects", "must be 4 numbers", "extra must be an object", "OverflowError",
                   "(id nl\\nid [/]): document 'missing.pdf'", "not valid Unicode", "not valid JSON",
                   "4300 digits", "nested too deeply", "not UTF-8 text (byte 0xe9", "longer than the line cap of 65536 bytes"):
        assert needle in text, needle
    assert len(load_import_errors(ws)) == n_bad


def test_a_folder_and_an_empty_file_stop_with_one_line(ws: Workspace, tmp_path: Path) -> None:
    _two_qa_files(tmp_path)
    code, out = _import(ws, tmp_path / "bench_a")
    assert code == 2 and len(out) == 1 and "is a folder (it holds qa.jsonl)" in out[0], out
    (tmp_path / "empty.jsonl").write_text("\n\n")
    code, out = _import(ws, tmp_path / "empty.jsonl")
    assert code == 2 and len(out) == 1 and "is empty" in out[0], out


def test_a_file_over_the_byte_cap_is_refused_before_it_is_read(ws: Workspace, tmp_path: Path) -> None:
    big = _jsonl(tmp_path / "big.jsonl", [_row(str(i), f"Q{i}?") for i in range(2000)])
    code, out = _import(ws, big, "--max-bytes", "10000")
    assert code == 2 and len(out) == 1, out
    assert "larger than the import cap of 10000 bytes" in out[0] and "--max-bytes" in out[0]
    assert load_tasks(ws) == []


# A small launcher, started fresh, forks the CLI: forking it from this test process would count the test
# process's own resident pages (the peak survives exec) as the CLI's.
LAUNCH = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss // 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _run_bounded(args: list[str], tmp_path: Path, timeout: float = 240) -> tuple[int, list[str], int]:
    """The CLI in a child process with an address-space ceiling (so a reader that does not stop cannot take the
    machine); returns its exit code, output lines and peak resident memory in MiB (of that child alone)."""
    out, peak = tmp_path / "cli.out", tmp_path / "cli.peak"
    with out.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(peak), *CLI, *args], stdout=sink,
                                stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "400"}, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
    lines = [line for line in out.read_text(errors="replace").splitlines() if line.strip()]
    return proc.returncode, lines, int(peak.read_text()) if peak.is_file() else -1


def _errors(lines: list[str]) -> list[str]:
    """The error lines of a CLI's output (a library's warning on a loaded machine is not the CLI's message); none of
    the output may be a traceback."""
    assert not any("Traceback" in x for x in lines), lines
    return [x for x in lines if x.startswith("error:")]


@pytest.mark.slow
def test_dev_zero_and_an_endless_pipe_stop_with_one_line_in_bounded_memory(ws: Workspace, tmp_path: Path) -> None:
    code, out, peak = _run_bounded(["tasks", "import", "/dev/zero", "-w", ws.root], tmp_path)
    out = _errors(out)
    assert code == 2 and len(out) == 1 and "/dev/zero" in out[0] and "NUL" in out[0], out
    assert 0 < peak < 1024, f"{peak} MiB"

    fifo = tmp_path / "endless.jsonl"
    os.mkfifo(fifo)

    def feed() -> None:  # a row that never ends: no newline, no NUL, forever
        try:
            with fifo.open("wb") as w:
                w.write(b'{"id": "endless", "question": "')
                while True:
                    w.write(b"a" * 65536)
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, out, peak = _run_bounded(["tasks", "import", str(fifo), "-w", ws.root,
                                    "--max-bytes", "33554432"], tmp_path)
    writer.join(timeout=30)
    out = _errors(out)
    assert code == 2 and len(out) == 1, out
    assert "endless.jsonl: more than the import cap of 32 MiB" in out[0] and "--max-bytes" in out[0]
    assert 0 < peak < 1024, f"{peak} MiB"
    assert load_tasks(ws) == []


def test_reimport_adds_nothing_and_keeps_the_other_files_tasks(ws: Workspace, tmp_path: Path) -> None:
    a, b = _two_qa_files(tmp_path)
    _import(ws, a)
    first = {t.task_id for t in load_tasks(ws)}
    _import(ws, b)
    code, out = _import(ws, a)
    assert code == 0 and "imported 3 of 3 rows" in out[-1] and ": 0 new;" in out[-1], out
    assert "the workspace holds 5 tasks" in out[-1]
    assert first <= {t.task_id for t in load_tasks(ws)} and len(load_tasks(ws)) == 5
    _jsonl(a, [_row("1", "Q1?"), _row("2", "Q2?")])  # the file lost a row: its shard follows the file
    code, out = _import(ws, a)
    assert code == 0 and "0 new, 1 no longer in the file" in out[-1] and len(load_tasks(ws)) == 4, out
