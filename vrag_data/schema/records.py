"""The records of the pipeline (DESIGN.md "Records"). `schemas/*.schema.json` is generated from these."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from vrag_data.inert import sanitize_text
from vrag_data.schema.geometry_types import Box

# Text from outside (a page, a table cell, a title, an outline, an imported or generated question and its gold
# answer): action tags, chat-template tokens and active HTML are made inert when the record is built, so no
# producer can forget it and no stored record can carry live markup to a model, a judge or an export.
Outside = Annotated[str, AfterValidator(sanitize_text)]


def _inert_values(value: Any) -> Any:
    """Every string inside a JSON-like value made inert (an imported row's extra fields, a generator's notes)."""
    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, dict):
        return {k: _inert_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert_values(v) for v in value]
    return value


OutsideData = Annotated[dict[str, Any], AfterValidator(_inert_values)]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


LayoutClass = Literal[
    "title", "text", "list", "table", "figure", "chart", "caption", "formula", "header", "footer", "ocr_line", "other"
]
# the extractor that wrote a layout block: the text layer, an OCR engine, the sample corpus, or a layout backend's own
# source name (vrag_data.ingest.backends: "pymupdf", "find_tables", "mineru", a plugin's), ranked by the backend
BlockSource = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
AnswerFormat = Literal["Str", "Int", "Float", "List", "None"]
HopType = Literal["single", "multi_page", "cross_doc", "unanswerable"]
EvidenceSource = Literal["text", "table", "chart", "figure", "layout"]


class TocEntry(Record):
    level: int
    title: Outside
    page: int  # 1-based


class FigureEntry(Record):
    kind: Literal["table", "figure", "chart"]
    caption: Outside
    page: int  # 1-based
    bbox: Box | None = None


class Document(Record):
    doc_id: str  # sha256 of the file bytes
    stem: str  # file stem; page images are <stem>_<page>.jpg
    source_path: str
    kind: Literal["pdf", "image"]
    n_pages: int
    n_bytes: int
    title: Outside = ""
    toc: list[TocEntry] = Field(default_factory=list)
    figures: list[FigureEntry] = Field(default_factory=list)
    text_layer_fraction: float = 0.0  # share of pages with a usable text layer
    # hash of the ingest settings that shaped the stored pages (dpi, layout, OCR, ...); same file + same
    # hash = nothing to redo
    ingest_hash: str = ""
    ingested_at: datetime = Field(default_factory=utcnow)


class Page(Record):
    page_id: str  # "<stem>_<page>", the basename VRAG-RL and UniDoc-RL match on
    doc_id: str
    stem: str
    page: int  # 1-based
    image: str  # path relative to the workspace, e.g. pages/<stem>_<page>.jpg
    width: int  # raw pixels of the rendered image
    height: int
    dpi: int
    text: Outside = ""  # text layer
    ocr_text: Outside = ""
    tables_md: list[Outside] = Field(default_factory=list)
    text_source: Literal["text_layer", "ocr", "none"] = "none"


class LayoutBlock(Record):
    block_id: str  # "<page_id>#<n>"
    doc_id: str
    page_id: str
    page: int
    cls: LayoutClass
    bbox: Box
    text: Outside = ""
    source: BlockSource
    score: float | None = None


class IngestError(Record):
    path: str
    stage: str  # open / render / layout / ocr / ...
    reason: str
    page: int | None = None
    at: datetime = Field(default_factory=utcnow)


class EvidenceBox(Record):
    page_id: str
    box: Box
    source: EvidenceSource | None = None
    text: Outside = ""


# A task's split names shard files, folders and HF splits of an export: lower-case letters, digits and "_" only
SPLIT_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"


class Task(Record):
    task_id: str  # hash of doc ids + question
    question: Outside
    answer: Outside
    answer_format: AnswerFormat | None = None
    doc_ids: list[str]  # document sha256 ids
    doc_stems: list[str]
    evidence_pages: list[str] = Field(default_factory=list)  # page ids "<stem>_<page>", 1-based
    evidence_boxes: list[EvidenceBox] = Field(default_factory=list)
    sources: list[EvidenceSource] = Field(default_factory=list)
    hop_type: HopType = "single"
    reasoning_type: str | None = None
    benchmark: str = ""
    split: str = "train"
    source_id: str = ""  # id in the source benchmark
    extra: OutsideData = Field(default_factory=dict)


ActionKind = Literal["think", "search", "select", "crop", "read", "answer", "finish", "invalid"]


class ReadRequest(Record):
    """One MM-Doc-R1 `<read>` entry: pages to read (as the model named them) and the sub-query."""

    page_ids: list[str]
    query: str


class Action(Record):
    kind: ActionKind
    thought: str = ""
    query: str = ""  # search
    keywords: list[str] = Field(default_factory=list)  # MM-Doc-R1 keyword search
    indices: list[int] = Field(default_factory=list)  # select
    boxes: list[list[float]] = Field(default_factory=list)  # crop, as the model wrote them
    page_ids: list[str] = Field(default_factory=list)  # read / crop target
    answer: str = ""
    evidence: list[str] = Field(default_factory=list)  # EVisRAG "[i]: ..." lines, index = image order
    observe: str = ""
    reason: str = ""  # why an action is invalid
    reads: list[ReadRequest] = Field(default_factory=list)  # MM-Doc-R1 `<read>`: one entry per sub-query


class ImageRef(Record):
    """An image shown to the model: a page, or a crop of a page (no bytes in trajectories)."""

    page_id: str
    box: Box | None = None  # None = the whole page
    stacked: list[Box] = Field(default_factory=list)  # several boxes stacked vertically (UniDoc-RL)


class Observation(Record):
    kind: Literal["search", "select", "crop", "read", "error", "info", "context"]
    text: str = ""
    images: list[ImageRef] = Field(default_factory=list)


class Turn(Record):
    idx: int
    assistant: str  # raw assistant text
    action: Action
    observation: Observation | None = None
    role: str = "policy"
    request_ids: list[str] = Field(default_factory=list)
    latency_s: float = 0.0


class Message(Record):
    role: Literal["system", "user", "assistant"]
    text: str
    images: list[ImageRef] = Field(default_factory=list)


class Usage(Record):
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retries: int = 0


class Provenance(Record):
    recipe: str
    policy: Literal["oracle", "model"]
    models: dict[str, str] = Field(default_factory=dict)  # role -> model name
    prompt_hash: str = ""
    config_hash: str = ""
    seed: int = 0
    code_version: str = ""


class CropRecord(Record):
    turn: int
    page_id: str
    box: Box


# "budget": the turn budget (free turns + the one forced-answer turn) or a role's call budget was spent without an
# accepted answer; "max_turns" is what runs written before that rule recorded for the same case
FinishStatus = Literal["answered", "budget", "max_turns", "error", "no_answer"]


class Trajectory(Record):
    traj_id: str  # hash of run, task, sample
    run_id: str
    task_id: str
    sample: int
    recipe: str
    prompt: list[Message]  # system + initial user message
    turns: list[Turn] = Field(default_factory=list)
    retrieved_pages: list[str] = Field(default_factory=list)  # page ids in the order first shown
    selected_pages: list[str] = Field(default_factory=list)
    crops: list[CropRecord] = Field(default_factory=list)
    evidence_space: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    status: FinishStatus = "answered"
    reason: str = ""
    n_invalid: int = 0
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    provenance: Provenance
    extra: dict[str, Any] = Field(default_factory=dict)  # recipe-specific: sufficiency label, plan, ...
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime = Field(default_factory=utcnow)


class Verdict(Record):
    run_id: str
    traj_id: str
    task_id: str
    filter: str
    passed: bool
    reason: str = ""
    score: float | None = None
    # whether the filter that wrote it judges the trajectory's answer (its class's `judges_answers`), stamped by the
    # filter chain: the report's judge figures read this flag; None (not stated: written before the flag, or not by a
    # chain) counts for the built-in `correctness` filter only
    judges_answer: bool | None = None


class ChatTurn(Record):
    role: Literal["system", "user", "assistant"]
    content: str  # with one "<image>" per image of this turn


class SftRecord(Record):
    id: str
    recipe: str
    task_id: str
    traj_id: str
    messages: list[ChatTurn]
    images: list[str]  # paths (relative to the export folder)
    augmentation: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class RewardModel(Record):
    style: str = "rule"
    ground_truth: str


class RlRecord(Record):
    id: str
    data_source: str
    prompt: list[dict[str, str]]  # [{"role": ..., "content": ...}]
    images: list[str]
    ability: str
    reward_model: RewardModel
    extra_info: dict[str, Any] = Field(default_factory=dict)
    file_name: str = ""  # VRAG-RL's trainer reads these two top-level columns
    reference_page: list[int] = Field(default_factory=list)


class RequestLog(Record):
    request_id: str
    run_id: str
    role: str
    model: str
    endpoint: str
    status: Literal["ok", "error", "cached"]
    error: str = ""
    latency_s: float = 0.0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    at: datetime = Field(default_factory=utcnow)


class RunManifest(Record):
    run_id: str
    recipe: str
    config: dict[str, Any]  # resolved, secrets never included
    config_hash: str
    code_version: str
    workspace: str
    samples: int = 1
    n_tasks: int = 0
    status: Literal["running", "finished", "failed"] = "running"
    stats: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


ALL_MODELS: dict[str, type[BaseModel]] = {
    "document": Document,
    "page": Page,
    "layout_block": LayoutBlock,
    "ingest_error": IngestError,
    "task": Task,
    "trajectory": Trajectory,
    "verdict": Verdict,
    "sft_record": SftRecord,
    "rl_record": RlRecord,
    "request_log": RequestLog,
    "run_manifest": RunManifest,
}
