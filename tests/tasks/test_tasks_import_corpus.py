"""`tasks import --format corpus`: the sample corpus (gold boxes) and the real shared corpus qa.jsonl."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.support.corpus_records import record_pdfs
from vrag_data.ids import task_id
from vrag_data.sample import make_sample_corpus
from vrag_data.store import Workspace, read_records
from vrag_data.schema.records import Task
from vrag_data.tasks import import_shard_path, import_tasks, load_import_errors, load_tasks


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):
    return make_sample_corpus(tmp_path_factory.mktemp("sample_for_tasks"), docs=4, seed=7)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_sample_corpus_imports_completely_with_exact_boxes(sample, tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path / "ws")).makedirs()
    docs = {d.stem: d for d in record_pdfs(ws, sample.paths)}
    s = import_tasks(str(sample.qa_path), ws, "corpus")
    rows = _rows(sample.qa_path)
    assert (s.imported, s.skipped, s.duplicates) == (len(rows), 0, 0)
    assert set(s.by_hop) == {"single", "multi_page", "cross_doc", "unanswerable"}
    assert s.shard == import_shard_path(ws, str(sample.qa_path)) and Path(s.shard).name.startswith("qa-")
    tasks = {t.source_id: t for t in load_tasks(ws)}
    for row in rows:
        t = tasks[row["id"]]
        stems = [Path(d).stem for d in row["extra"].get("doc_ids", [row["doc_id"]])]
        assert t.doc_stems == stems and t.doc_ids == [docs[st].doc_id for st in stems]
        assert t.task_id == task_id(t.doc_ids, row["question"], Path(s.shard).stem)  # the source is part of the id
        assert t.benchmark == "sample" and t.answer == row["answer"]
        gold = row["extra"]["evidence_boxes"]
        assert len(t.evidence_boxes) == len(gold)
        for eb, g in zip(t.evidence_boxes, gold):
            assert eb.page_id == f"{Path(g['doc']).stem}_{g['page']}"
            assert eb.box.raw == pytest.approx(tuple(g["bbox"]))  # ingest dpi 144 = gold dpi: same pixels
            assert all(0 <= v <= 1000 for v in eb.box.norm) and eb.source == g["source"]
        if row["extra"]["kind"] == "cross_doc":
            assert t.hop_type == "cross_doc" and len(t.evidence_pages) == 2


def test_boxes_follow_the_ingest_dpi(sample, tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path / "ws72")).makedirs()
    record_pdfs(ws, sample.paths, dpi=72)
    import_tasks(str(sample.qa_path), ws, "corpus")
    row = next(r for r in _rows(sample.qa_path) if r["extra"]["kind"] == "table_cell")
    t = next(t for t in load_tasks(ws) if t.source_id == row["id"])
    assert t.evidence_boxes[0].box.raw == pytest.approx(tuple(v / 2 for v in row["extra"]["evidence_boxes"][0]["bbox"]))


def test_reimport_is_idempotent(sample, tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(ws, sample.paths)
    first = import_tasks(str(sample.qa_path), ws, "corpus")
    before = read_records(first.shard, Task)
    second = import_tasks(str(sample.qa_path), ws, "corpus")
    after = read_records(second.shard, Task)
    assert [t.model_dump(exclude={"extra"}) for t in before] == [t.model_dump(exclude={"extra"}) for t in after]
    assert len(load_tasks(ws)) == first.imported
    assert len(load_tasks(ws, limit=5)) == 5
    assert [t.task_id for t in load_tasks(ws, limit=5)] == [t.task_id for t in load_tasks(ws)][:5]


def test_shared_corpus_qa_with_only_a_few_documents_ingested(shared_corpus: Path, tmp_path: Path) -> None:
    """Only four documents are in the workspace, one of them cut at 40 pages: every other row is reported."""
    docs_dir = shared_corpus / "docs"
    names = ["Independents-Report.pdf", "longdocurl_4055915.pdf", "00a76e3a9a36255616e2dc14a6eb5dde598b321f.pdf"]
    ws = Workspace(str(tmp_path / "ws")).makedirs()
    record_pdfs(ws, [docs_dir / n for n in names])
    record_pdfs(ws, [docs_dir / "AMAZON_2017_10K.pdf"], max_pages=40)
    qa = shared_corpus / "qa.jsonl"
    rows = _rows(qa)
    ok = [r for r in rows if r["doc_id"] in names
          or (r["doc_id"] == "AMAZON_2017_10K.pdf" and all(p <= 40 for p in r["evidence_pages"]))]
    cut = [r for r in rows if r["doc_id"] == "AMAZON_2017_10K.pdf" and any(p > 40 for p in r["evidence_pages"])]
    assert cut, "the corpus should have AMAZON rows beyond page 40"

    s = import_tasks(str(qa), ws, "corpus", split="eval")
    assert s.rows == len(rows)
    assert s.imported + s.duplicates == len(ok)
    assert s.skipped == len(rows) - len(ok)
    assert len(load_import_errors(ws)) == s.skipped
    assert sum("is out of range (40 pages ingested" in e for e in s.errors) == len(cut)
    assert sum("is not in the workspace" in e for e in s.errors) == s.skipped - len(cut)

    tasks = {t.source_id: t for t in load_tasks(ws)}
    t = tasks["mmlongbench-doc-0007"]
    assert t.evidence_pages == ["Independents-Report_3", "Independents-Report_5"] and t.hop_type == "multi_page"
    assert t.benchmark == "MMLongBench-Doc" and t.split == "eval" and t.answer_format == "Float"
    assert tasks["mmlongbench-doc-0008"].hop_type == "unanswerable"
    fb = [t for t in tasks.values() if t.benchmark == "FinanceBench"]
    assert fb and all(t.doc_stems == ["AMAZON_2017_10K"] for t in fb)
    vid = tasks["vidoseek-00a76e3a9a36255616e2dc14a6eb5dde598b321f_1"]
    assert vid.evidence_pages == ["00a76e3a9a36255616e2dc14a6eb5dde598b321f_11"] and vid.sources == ["layout"]
    (ldu,) = [t for t in tasks.values() if t.benchmark == "LongDocURL"]
    (box,) = ldu.evidence_boxes
    assert box.page_id == "longdocurl_4055915_54"
    assert box.box.norm == (80, 260, 920, 520)  # 0-1 normalised in the source
    assert box.box.raw == pytest.approx((0.08 * 1224, 0.26 * 1584, 0.92 * 1224, 0.52 * 1584))
    hops = Counter(t.hop_type for t in tasks.values())
    assert hops["single"] and hops["multi_page"] and hops["unanswerable"]
