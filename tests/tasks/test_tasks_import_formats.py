"""`tasks import` for each benchmark format, on small hand-written files in the published field layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.corpus_records import blank_pdf, record_pdfs
from vrag_data.cli.main import app
from vrag_data.errors import VragError
from vrag_data.store import Workspace
from vrag_data.tasks import import_tasks, load_import_errors, load_tasks

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    docs = tmp_path / "docs"
    docs.mkdir()
    pdfs = [
        blank_pdf(docs / "alpha_report.pdf", 12),
        blank_pdf(docs / "beta_report.pdf", 6),
        blank_pdf(docs / "GAMMA_2022_10K.pdf", 10),
        blank_pdf(docs / "delta-deck-123.pdf", 20, size=(720, 405)),
    ]
    w = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(w, pdfs)
    return w


def _by_source(tasks):
    return {t.source_id: t for t in tasks}


def test_mmlongbench_literal_pages_and_list_answers(ws: Workspace) -> None:
    s = import_tasks(str(DATA / "mmlongbench_samples.json"), ws, "mmlongbench")
    assert (s.rows, s.imported, s.skipped) == (7, 4, 3)
    assert s.by_hop == {"multi_page": 1, "single": 2, "unanswerable": 1}
    tasks = load_tasks(ws)
    multi = next(t for t in tasks if t.answer == "18.29%")
    assert multi.evidence_pages == ["alpha_report_3", "alpha_report_5"]
    assert multi.sources == ["text", "table"] and multi.benchmark == "MMLongBench-Doc"
    listed = next(t for t in tasks if t.answer_format == "List")
    assert listed.answer == "['North', 'South']" and listed.extra["answer_list"] == ["North", "South"]
    none = next(t for t in tasks if t.hop_type == "unanswerable")
    assert none.evidence_pages == [] and none.answer == "Not answerable"
    beta = next(t for t in tasks if t.doc_stems == ["beta_report"])
    assert beta.sources == ["layout", "figure"]
    reasons = " | ".join(s.errors)
    assert "page 0 of 'alpha_report.pdf' is out of range" in reasons
    assert "'missing_report.pdf' is not in the workspace" in reasons
    assert "not a literal list" in reasons
    assert all(line.startswith("mmlongbench_samples.json row ") for line in s.errors)


def test_financebench_pages_are_shifted_from_zero_based(ws: Workspace) -> None:
    s = import_tasks(str(DATA / "financebench_sample.jsonl"), ws, "financebench")
    assert (s.imported, s.skipped) == (2, 2)
    tasks = _by_source(load_tasks(ws))
    assert tasks["financebench_id_00001"].evidence_pages == ["GAMMA_2022_10K_1"]
    two = tasks["financebench_id_00002"]
    assert two.evidence_pages == ["GAMMA_2022_10K_5", "GAMMA_2022_10K_7"] and two.hop_type == "multi_page"
    assert two.reasoning_type == "Numerical reasoning" and two.benchmark == "FinanceBench"
    assert [e["page"] for e in two.extra["evidence"]] == [5, 7]
    assert any("page 11 of 'GAMMA_2022_10K' is out of range (10 pages ingested" in e for e in s.errors)
    assert any("'OMEGA_2019_10K' is not in the workspace" in e for e in s.errors)


def test_slidevqa_decks_match_by_stem(ws: Workspace) -> None:
    s = import_tasks(str(DATA / "slidevqa_sample.jsonl"), ws, "slidevqa", split="test")
    assert (s.imported, s.skipped) == (2, 2)
    tasks = _by_source(load_tasks(ws))
    assert tasks["101"].evidence_pages == ["delta-deck-123_1"] and tasks["101"].split == "test"
    assert tasks["102"].evidence_pages == ["delta-deck-123_2", "delta-deck-123_5"]
    assert tasks["102"].extra["arithmetic_expression"] == "400 - 150"
    assert tasks["102"].reasoning_type == "Multi-Hop; Numerical"


def test_vrag_rag_dataset(ws: Workspace) -> None:
    s = import_tasks(str(DATA / "vrag_rag_dataset.json"), ws, "vrag")
    assert (s.rows, s.imported, s.skipped) == (4, 2, 2)
    tasks = _by_source(load_tasks(ws))
    first = tasks["alpha_report_1"]
    assert first.evidence_pages == ["alpha_report_10", "alpha_report_11"] and first.answer == "195-205 Centigrade"
    assert first.sources == ["text"] and first.reasoning_type == "Multi-Hop"
    assert tasks["beta_report_1"].sources == ["layout"]
    assert any("missing field 'meta_info'" in e for e in s.errors)


def test_errors_are_recorded_per_file_and_replaced_on_reimport(ws: Workspace) -> None:
    import_tasks(str(DATA / "vrag_rag_dataset.json"), ws, "vrag")
    import_tasks(str(DATA / "slidevqa_sample.jsonl"), ws, "slidevqa")
    import_tasks(str(DATA / "vrag_rag_dataset.json"), ws, "vrag")
    errors = load_import_errors(ws)
    assert len(errors) == 4  # 2 per file, the re-import replaced its own rows
    assert {Path(e.path).name for e in errors} == {"vrag_rag_dataset.json", "slidevqa_sample.jsonl"}
    assert all(e.stage == "tasks.import" for e in errors)
    assert len(load_tasks(ws)) == 4  # the error log is not mistaken for a task shard


def test_bad_rows_never_stop_the_batch(ws: Workspace, tmp_path: Path) -> None:
    f = tmp_path / "mixed.jsonl"
    f.write_text(
        '{"id": "a", "source_benchmark": "X", "doc_id": "alpha_report.pdf", "question": "Q1?", "answer": "1", '
        '"evidence_pages": [2], "evidence_sources": ["text"], "answer_format": "Int", "extra": {}}\n'
        "{not json\n"
        '["a list"]\n'
        '{"id": "b", "doc_id": "alpha_report.pdf", "answer": "2", "evidence_pages": [2]}\n'
        '{"id": "c", "doc_id": "alpha_report.pdf", "question": "Q3?", "answer": "3", "evidence_pages": [2], '
        '"extra": {"evidence_boxes": [{"page": 2, "bbox": [10, 10, 5, 5], "dpi": 144, "source": "text"}]}}\n'
    )
    s = import_tasks(str(f), ws, "corpus")
    assert (s.rows, s.imported, s.skipped) == (5, 1, 4)
    assert "mixed.jsonl line 2: not valid JSON" in s.errors[0]
    assert "expected a JSON object" in s.errors[1]
    assert "line 4 (id b): missing field 'question'" in s.errors[2]
    assert "line 5 (id c)" in s.errors[3] and "empty or inverted" in s.errors[3]
    # blank lines do not shift the numbers (they are the file's own line numbers), and a BOM is not an error
    g = tmp_path / "bom.jsonl"
    g.write_text("\ufeff" + f.read_text().replace("{not json\n", "\n\n{not json\n"), encoding="utf-8")
    t = import_tasks(str(g), ws, "corpus")
    assert t.imported == 1 and "bom.jsonl line 4: not valid JSON" in t.errors[0] and "line 7 (id c)" in t.errors[3]


def test_unusable_inputs_fail_with_one_line(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(VragError, match="file not found"):
        import_tasks(str(tmp_path / "nope.json"), ws, "corpus")
    with pytest.raises(VragError, match="unknown format"):
        import_tasks(str(DATA / "vrag_rag_dataset.json"), ws, "docvqa")
    with pytest.raises(VragError, match="no ingested documents"):
        import_tasks(str(DATA / "vrag_rag_dataset.json"), Workspace(str(tmp_path / "empty")), "vrag")
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(VragError, match="not valid JSON"):
        import_tasks(str(tmp_path / "broken.json"), ws, "corpus")


def test_cli_import_reports_and_exits_zero(ws: Workspace) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["tasks", "import", str(DATA / "slidevqa_sample.jsonl"), "-w", ws.root,
                              "--format", "slidevqa"])
    assert res.exit_code == 0, res.output
    assert "imported 2 of 4 rows" in res.output and "skipped" in res.output
    bad = runner.invoke(app, ["tasks", "import", str(DATA / "slidevqa_sample.jsonl"), "-w", ws.root,
                              "--format", "nope"])
    assert bad.exit_code == 2 and "unknown --format" in bad.output and "Traceback" not in bad.output
    missing = runner.invoke(app, ["tasks", "import", "/nonexistent/qa.jsonl", "-w", ws.root])
    assert missing.exit_code == 2 and "file not found" in missing.output


@pytest.mark.parametrize("split", ["Test", "test set", "../outside", "", "x" * 33])
def test_a_split_that_cannot_name_a_file_or_an_hf_split_is_refused(ws: Workspace, split: str) -> None:
    """The split names export files, folders (`easyr1/<split>/`) and HF splits: anything but lower-case letters,
    digits and _ stops the import with one line, before any task is written."""
    res = CliRunner().invoke(app, ["tasks", "import", str(DATA / "slidevqa_sample.jsonl"), "-w", ws.root,
                                   "--format", "slidevqa", "--split", split])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and "--split" in lines[0] and "lower-case" in lines[0], res.output
    assert load_tasks(ws) == []


def test_a_test_split_is_stored_on_every_task(ws: Workspace) -> None:
    import_tasks(str(DATA / "slidevqa_sample.jsonl"), ws, "slidevqa", split="validation_2")
    assert {t.split for t in load_tasks(ws)} == {"validation_2"}
