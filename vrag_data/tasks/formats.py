"""Benchmark annotation formats -> `RawTask` (pure parsing, no workspace access).

Each parser reads one source row and returns a RawTask whose pages are 1-based and whose documents are
still names (file names or stems); `resolve.py` matches them against the ingested corpus. A row that
cannot be parsed raises RowError with a one-line reason; the importer reports it and goes on.

Formats (field names as published by each benchmark):
- corpus: the shared `qa.jsonl` rows (id, source_benchmark, doc_id, question, answer, evidence_pages 1-based,
  evidence_sources, answer_format, extra). `extra.evidence_boxes` = [{page, bbox raw px, dpi, source, doc?}],
  `extra.evidence_bboxes` (LongDocURL) = [{page, bbox_xyxy_normalized 0-1}]; cross-document rows list
  `extra.doc_ids` and `extra.evidence_docs` (the document of each evidence page).
- mmlongbench: MMLongBench-Doc `samples.json` (doc_id, question, answer, evidence_pages as the string "[3, 5]",
  evidence_sources as "['Chart']", answer_format, doc_type); list answers are python literals.
- financebench: `financebench_open_source.jsonl` (financebench_id, doc_name, question, answer,
  evidence[{evidence_text, evidence_page_num 0-based, doc_name?}], question_type, question_reasoning, ...).
- slidevqa: SlideVQA annotations (qa_id, deck_name, question, answer, evidence_pages 1-based,
  arithmetic_expression, answer_type, reasoning_type).
- vrag: VRAG-RL / ViDoSeek `rag_dataset.json` ({"examples": [...]} or a list; uid, query, reference_answer,
  meta_info{file_name, reference_page 1-based, source_type, query_type}).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("corpus", "mmlongbench", "slidevqa", "vrag", "financebench")
MAX_QUESTION_CHARS = 10_000  # a question is part of every prompt of its episodes; a longer one is a broken row
MAX_BYTES = 512 * 2**20  # `tasks import --max-bytes`: a larger file is refused before it is read (a pipe stops there)
MAX_LINE_BYTES = 64 * 2**20  # `--max-line-bytes`: a longer JSON line (after the first) is a skipped row
ANSWER_FORMATS = ("Str", "Int", "Float", "List", "None")
DEFAULT_BENCHMARK = {"mmlongbench": "MMLongBench-Doc", "financebench": "FinanceBench", "slidevqa": "SlideVQA",
                     "vrag": "VRAG-RL", "corpus": "corpus"}


class RowError(ValueError):
    """One source row cannot become a task; the message says why (one line)."""


@dataclass
class RawBox:
    doc: str
    page: int  # 1-based
    bbox: tuple[float, float, float, float]
    dpi: float | None = None  # raw pixels at this dpi; None = 0-1 normalised
    source: str | None = None
    text: str = ""


@dataclass
class RawTask:
    source_id: str
    question: str
    answer: str
    docs: list[str]  # document names, primary first
    pages: list[tuple[str, int]]  # (document name, 1-based page)
    answer_format: str | None = None
    boxes: list[RawBox] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    benchmark: str = ""
    reasoning_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def evidence_source(label: Any) -> str | None:
    """Map a benchmark's modality label to text|table|chart|figure|layout (None when unknown)."""
    s = str(label).lower()
    for key, out in (("layout", "layout"), ("table", "table"), ("chart", "chart"), ("figure", "figure"),
                     ("image", "figure"), ("picture", "figure"), ("text", "text")):
        if key in s:
            return out
    return None


def _sources(labels: Any) -> list[str]:
    if isinstance(labels, str):
        labels = literal(labels, "evidence_sources") if labels.strip().startswith("[") else [labels]
    out = [evidence_source(x) for x in (labels or [])]
    return list(dict.fromkeys(x for x in out if x))


def literal(text: Any, name: str) -> Any:
    """Parse a python/JSON literal such as "[3, 5]" safely (no code is executed)."""
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        raise RowError(f"{name} {text[:60]!r} is not a literal list ({type(err).__name__})") from None


def _pages(value: Any, name: str, dedup: bool = True) -> list[int]:
    value = literal(value, name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        raise RowError(f"{name} must be a list of page numbers, got {str(value)[:60]!r}")
    return list(dict.fromkeys(value)) if dedup else list(value)


def _req(row: dict[str, Any], key: str) -> Any:
    v = row.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        raise RowError(f"missing field {key!r}")
    return v


def _question(row: dict[str, Any], key: str) -> str:
    q = _req(row, key)
    if not isinstance(q, str):
        raise RowError(f"field {key!r} must be text, got {type(q).__name__}")
    if len(q) > MAX_QUESTION_CHARS:
        raise RowError(f"field {key!r} is {len(q)} characters long; at most {MAX_QUESTION_CHARS}")
    return q


def _label(value: Any) -> str | None:
    """A free-text label (reasoning type, query type): text or a number, else left out."""
    if value is None or isinstance(value, (dict, list, bool)) or value == "":
        return None
    return str(value)


def _objects(value: Any, name: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RowError(f"{name} must be a list of objects, got {str(value)[:60]!r}")
    return value


def _fmt(value: Any) -> str | None:
    return value if value in ANSWER_FORMATS else None


def _answer(value: Any) -> str:
    if isinstance(value, dict):
        raise RowError(f"field 'answer' must be text, a number or a list, got an object {str(value)[:60]!r}")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parse_corpus(row: dict[str, Any]) -> RawTask:
    doc = str(_req(row, "doc_id"))
    if not isinstance(row.get("extra") or {}, dict):
        raise RowError(f"extra must be an object, got {type(row['extra']).__name__}")
    extra = dict(row.get("extra") or {})
    docs = [str(d) for d in extra.get("doc_ids") or [doc]]
    pages = _pages(row.get("evidence_pages") or [], "evidence_pages", dedup=False)
    page_docs = extra.get("evidence_docs") or [doc] * len(pages)
    if len(page_docs) != len(pages):
        raise RowError("extra.evidence_docs must name one document per evidence page")
    refs = list(dict.fromkeys((str(d), p) for d, p in zip(page_docs, pages)))
    boxes = []
    for b in _objects(extra.pop("evidence_boxes", None), "extra.evidence_boxes"):
        boxes.append(RawBox(str(b.get("doc") or doc), int(b["page"]), tuple(b["bbox"]), float(b.get("dpi") or 72),
                            evidence_source(b["source"]) if b.get("source") else None, str(b.get("text") or "")))
    for b in _objects(extra.pop("evidence_bboxes", None), "extra.evidence_bboxes"):  # LongDocURL: 0-1 normalised x1,y1,x2,y2
        bbox = b.get("bbox_xyxy_normalized") or b.get("bbox")
        boxes.append(RawBox(str(b.get("doc") or doc), int(b["page"]), tuple(bbox), None))
    reasoning = next((extra[k] for k in ("question_reasoning", "query_type", "task_tag", "kind") if extra.get(k)), None)
    return RawTask(
        source_id=str(row.get("id") or ""), question=_question(row, "question"), answer=_answer(_req(row, "answer")),
        docs=docs, pages=refs, answer_format=_fmt(row.get("answer_format")),
        boxes=boxes, sources=_sources(row.get("evidence_sources")), benchmark=str(row.get("source_benchmark") or ""),
        reasoning_type=str(reasoning) if reasoning else None,
        extra={**extra, "doc_type": row.get("doc_type")} if row.get("doc_type") else extra,
    )


def parse_mmlongbench(row: dict[str, Any]) -> RawTask:
    doc = str(_req(row, "doc_id"))
    answer = _answer(_req(row, "answer"))
    fmt = _fmt(row.get("answer_format"))
    extra: dict[str, Any] = {"doc_type": row.get("doc_type"), "orig_evidence_sources": row.get("evidence_sources")}
    if fmt == "List" and answer.strip().startswith("["):
        extra["answer_list"] = literal(answer, "answer")  # the gold list; `answer` keeps the source string
    pages = _pages(row.get("evidence_pages") or "[]", "evidence_pages")
    return RawTask(source_id=str(row.get("id", row.get("index", ""))), question=_question(row, "question"),
                   answer=answer, docs=[doc], pages=[(doc, p) for p in pages], answer_format=fmt,
                   sources=_sources(row.get("evidence_sources")), extra=extra)


def parse_financebench(row: dict[str, Any]) -> RawTask:
    doc = str(_req(row, "doc_name"))
    pages: list[tuple[str, int]] = []
    texts = []
    for ev in _objects(row.get("evidence"), "evidence"):
        num = ev.get("evidence_page_num")
        if not isinstance(num, int) or isinstance(num, bool):
            raise RowError(f"evidence_page_num {num!r} is not an integer")
        ref = (str(ev.get("doc_name") or doc), num + 1)  # FinanceBench pages are 0-based
        if ref not in pages:
            pages.append(ref)
        texts.append({"page": num + 1, "text": ev.get("evidence_text", "")})
    docs = list(dict.fromkeys([doc, *(d for d, _ in pages)]))
    keep = ("question_type", "question_reasoning", "justification", "company", "doc_type", "doc_period")
    extra = {k: row[k] for k in keep if row.get(k) is not None}
    extra["evidence"] = texts
    return RawTask(source_id=str(row.get("financebench_id", "")), question=_question(row, "question"),
                   answer=_answer(_req(row, "answer")), docs=docs, pages=pages,
                   reasoning_type=_label(row.get("question_reasoning")), extra=extra)


def parse_slidevqa(row: dict[str, Any]) -> RawTask:
    deck = str(_req(row, "deck_name"))
    pages = _pages(row.get("evidence_pages") or [], "evidence_pages")
    keep = ("arithmetic_expression", "answer_type", "deck_url")
    extra = {k: row[k] for k in keep if row.get(k) is not None}
    return RawTask(source_id=str(row.get("qa_id", "")), question=_question(row, "question"),
                   answer=_answer(_req(row, "answer")), docs=[deck], pages=[(deck, p) for p in pages],
                   reasoning_type=_label(row.get("reasoning_type")), extra=extra)


def parse_vrag(row: dict[str, Any]) -> RawTask:
    meta = row.get("meta_info")
    if not isinstance(meta, dict):
        raise RowError("missing field 'meta_info'")
    doc = str(_req(meta, "file_name"))
    pages = _pages(meta.get("reference_page") or [], "meta_info.reference_page")
    src = evidence_source(meta["source_type"]) if meta.get("source_type") else None
    return RawTask(source_id=str(row.get("uid", "")), question=_question(row, "query"),
                   answer=_answer(_req(row, "reference_answer")), docs=[doc], pages=[(doc, p) for p in pages],
                   sources=[src] if src else [], reasoning_type=_label(meta.get("query_type")),
                   extra={k: v for k, v in meta.items() if k in ("source_type", "query_type")})


PARSERS: dict[str, Callable[[dict[str, Any]], RawTask]] = {
    "corpus": parse_corpus, "mmlongbench": parse_mmlongbench, "financebench": parse_financebench,
    "slidevqa": parse_slidevqa, "vrag": parse_vrag,
}


def parse_row(fmt: str, row: Any) -> RawTask:
    if not isinstance(row, dict):
        raise RowError(f"expected a JSON object, got {type(row).__name__}")
    try:
        raw = PARSERS[fmt](row)
    except (RowError, UnicodeError):
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as err:  # malformed nested fields
        raise RowError(f"malformed row ({type(err).__name__}: {str(err)[:120]})") from None
    if not raw.benchmark:
        raw.benchmark = DEFAULT_BENCHMARK[fmt]
    return raw
