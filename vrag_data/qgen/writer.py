"""The `question_writer` role: shown the evidence pages with the evidence regions outlined, it writes one
question whose answer needs that evidence, as JSON {question, answer, answer_format, reasoning_type}.

Replies are never trusted: a reply that is not a JSON object, lacks a field, declares an unknown answer
format, names the document or a page, or points at "the highlighted box" is rejected with its reason.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from PIL import ImageDraw

from vrag_data.qgen.docname import NEUTRAL, label_terms
from vrag_data.qgen.evidence import Evidence
from vrag_data.schema.records import Document, ImageRef, Message
from vrag_data.store import Workspace
from vrag_data.teacher.pool import EndpointRefused, TeacherError, TeacherPool

ANSWER_FORMATS = ("Str", "Int", "Float", "List")
ROLE = "question_writer"
ORACLE = "oracle"  # the offline template writer's name (oracle_writer, table_hops)


@dataclass(frozen=True)
class Hop:
    """One step of a multi-hop question as a stand-alone sub-question, with its answer and its evidence region
    (index into the attempt's regions): the verifier checks each hop on its own."""

    question: str
    answer: str
    region: int


@dataclass(frozen=True)
class Written:
    """A candidate question. `visible` = strings that must be readable in the evidence for the answer to
    follow from it (the oracle knows them; for a model writer it is the answer itself)."""

    question: str
    answer: str
    answer_format: str
    reasoning_type: str
    visible: tuple[str, ...] = ()
    writer: str = "oracle"
    # table cells the answer was read from: (evidence region index, row label, column name, value); re-read after
    # writing, so a value from the wrong column or a merged row never becomes a gold answer
    cells: tuple[tuple[int, str, str, str], ...] = ()
    hops: tuple[Hop, ...] = ()  # multi-hop questions of the offline writer; a model writer's have none


@dataclass(frozen=True)
class Rejected:
    stage: str  # writer | check | dedup | verify
    reason: str  # a short code: invalid_json, names_document, ambiguous, ...
    detail: str = ""
    question: str = ""
    answer: str = ""


@dataclass
class Attempt:
    """One evidence set plus what the writer was asked for."""

    idx: int
    evidence: Evidence
    qtype: str  # extraction | logic
    request_ids: list[str] = field(default_factory=list)


class Writer(Protocol):
    name: str

    async def write(self, attempt: Attempt) -> Written | Rejected: ...


# -- checks on any writer's output (pure) ------------------------------------------------------------

_PAGE_REF = re.compile(r"\b(page|slide|pg|p)\.?\s*(no\.?|number|#)?\s*\d+\b|\b(first|second|third|last|next|previous)\s+(page|slide)\b", re.I)
_POSITION = re.compile(r"\bthe\s+table\s+(?:listing\s+\u201c[^\u201d]{1,80}\u201d\s+)?on\s+PDF\s+page\s+\d+"
                       r"(?:\s+\(printed as page \d+\))?\s+of\b")
_DEICTIC = re.compile(
    r"\b(this|that|the|above|given|attached|provided|shown|following)\s+(document|pdf|file|image|picture|screenshot|page|slide)s?\b"
    r"|\b(highlighted|outlined|marked|boxed|red)\s+(box|region|area|rectangle|part|section)\b", re.I)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def document_names(doc: Document) -> list[str]:
    """File names a question must not copy: the stem and the file name (without extension). A title may be named
    (a report's title is how a reader finds it); a junk title (an accession number) is not what docname uses."""
    names = {doc.stem, PurePosixPath(doc.source_path.replace("\\", "/")).stem}
    return sorted(n for n in (_norm(x) for x in names) if len(n) >= 4)


def check_question(w: Written, docs: list[Document], corpus: list[Document] = (),  # type: ignore[assignment]
                   labels: dict[str, str] | None = None) -> Rejected | None:
    """Reject questions that copy a document's file name or stem, name a page, point at what the writer was
    shown, or do not name their own document when it has a readable name (`labels`: stem -> docname label):
    in a corpus of several 10-Ks, "revenue in 2017" has one answer only with the company named."""
    q = f" {_norm(w.question)} "
    own = {d.doc_id for d in docs}
    named = [(d, document_names(d)) for d in docs] + [(d, document_names(d)) for d in corpus if d.doc_id not in own]
    # a file saved under its title's word ("bert.pdf" for "BERT: Pre-training ...") is named by its title
    titles = " ".join(f" {_norm(x)} " for x in (labels or {}).values())
    for d, names in named:
        for name in names:
            if f" {name} " in q and f" {name} " not in titles:
                return Rejected("check", "names_document", f"the question copies the file name of document {d.stem!r}",
                                w.question, w.answer)
    for d in docs:
        terms = label_terms((labels or {}).get(d.stem, ""))
        if terms and not terms & set(q.split()):
            return Rejected("check", "unnamed_document", f"the question does not say which document it is about "
                            f"(none of {sorted(terms)[:6]} from its readable name)", w.question, w.answer)
    # a table's place on its page, a document's first-page heading: true references, no page pointed at
    m = _PAGE_REF.search(NEUTRAL.sub(" ", _POSITION.sub(" ", w.question)))
    if m:
        return Rejected("check", "names_page", f"the question names a page ({m.group(0)!r})", w.question, w.answer)
    m = _DEICTIC.search(NEUTRAL.sub(" ", w.question))
    if m:
        return Rejected("check", "refers_to_shown_image",
                        f"the question points at what the writer was shown ({m.group(0)!r}); it must stand alone",
                        w.question, w.answer)
    if len(w.question.split()) < 4:
        return Rejected("check", "too_short", "the question has fewer than 4 words", w.question, w.answer)
    bad = next((c for c in w.question + w.answer if c == "\ufffd" or unicodedata.category(c) in _UNREADABLE), "")
    if bad:  # a character the text layer could not map ("Town\ufffds"), a symbol font's private glyph, a control
        return Rejected("check", "garbled_text", f"the question or answer holds an unreadable character (U+{ord(bad):04X})",
                        w.question, w.answer)
    return None


_UNREADABLE = frozenset({"Cc", "Cf", "Co", "Cs", "Cn"})


def _json_object(text: str) -> dict[str, Any] | None:
    body = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S | re.I).strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fence:
        body = fence.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(body[start:end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def parse_reply(text: str, qtype: str, writer: str) -> Written | Rejected:
    """A writer reply -> Written, or Rejected with the reason (invalid_json, missing_field, ...)."""
    obj = _json_object(text)
    snippet = (text or "").strip().replace("\n", " ")[:120]
    if obj is None:
        return Rejected("writer", "invalid_json", f"the reply is not a JSON object: {snippet!r}")
    if obj.get("question") in (None, "") and str(obj.get("decline", "")).strip():
        return Rejected("writer", "writer_declined", str(obj["decline"])[:200])
    q, a = obj.get("question"), obj.get("answer")
    if not isinstance(q, str) or not q.strip():
        return Rejected("writer", "missing_field", "the reply has no 'question' string")
    if a is None or (isinstance(a, str) and not a.strip()) or isinstance(a, dict):
        return Rejected("writer", "missing_field", "the reply has no usable 'answer'", q.strip())
    fmt = obj.get("answer_format")
    if isinstance(a, list):
        answer, fmt = json.dumps([str(x) for x in a], ensure_ascii=False), fmt or "List"
    else:
        answer = str(a).strip()
    if fmt not in ANSWER_FORMATS:
        return Rejected("writer", "bad_answer_format", f"answer_format {fmt!r} is not one of {list(ANSWER_FORMATS)}",
                        q.strip(), answer)
    rtype = str(obj.get("reasoning_type") or qtype).strip().lower()
    return Written(q.strip(), answer, str(fmt), rtype, (answer,), writer)


# -- the model writer ----------------------------------------------------------------------------------

WRITER_SYSTEM = (
    "You write exam questions for an assistant that answers questions by searching a large collection of "
    "document page images.\n"
    "You are shown one or more pages. On each page the evidence region(s) are outlined with a red rectangle. "
    "Write ONE question that can only be answered by reading the outlined evidence, together with its answer.\n"
    "Rules:\n"
    "- The answer must follow from the outlined regions; when there are several regions, the answer must need all of them.\n"
    "- The question must make sense on its own to someone who has never seen these pages: name the document the "
    "way a reader would look for it (the company, report and year, as given below), and the table or chart topic, "
    "so that it has one answer across the whole collection.\n"
    "- Never copy a file name, never name a page or slide number, and never refer to 'the image', "
    "'this document' or 'the outlined box'.\n"
    "- With several regions, make the second step depend on the first (a comparison, difference or ratio of two "
    "values, or an entity found in one region and looked up in the other), not two questions joined by 'and'.\n"
    "- It must not be answerable from general knowledge without the pages.\n"
    "- Keep the answer short: a number, a name, a short phrase, or a list of such items.\n"
    "Reply with one JSON object and nothing else:\n"
    '{"question": "...", "answer": "...", "answer_format": "Str|Int|Float|List", '
    '"reasoning_type": "extraction|logic"}\n'
    "If the regions hold nothing worth asking about, reply {\"decline\": \"<why>\"}."
)

KIND_HINT = {
    "single": "There is one outlined region.",
    "multi_page": "The outlined regions are on different pages of one document; the question must combine them.",
    "cross_doc": "The outlined regions come from different documents; the question must combine them.",
}
TYPE_HINT = {
    "extraction": "Reasoning type: extraction (the answer is read off the evidence).",
    "logic": "Reasoning type: logic (the answer needs a comparison, calculation or inference over the evidence).",
}


def writer_messages(attempt: Attempt, labels: dict[str, str] | None = None) -> list[Message]:
    ev = attempt.evidence
    images = []
    for pid in ev.page_ids:
        boxes = [r.block.bbox for r in ev.regions if r.page_id == pid]
        images.append(ImageRef(page_id=pid, stacked=boxes))  # `stacked` on a whole page = boxes to outline
    kinds = ", ".join(r.source for r in ev.regions)
    # document text (cut and stripped of control characters by docname), given as data, not as instructions
    names = "; ".join(json.dumps((labels or {}).get(s) or "(no readable name: describe it by its content)",
                                 ensure_ascii=False) for s in ev.stems)
    text = (f"{KIND_HINT[ev.kind]} Evidence content: {kinds}.\nThe pages come from (document names, quoted): {names}\n"
            f"{TYPE_HINT.get(attempt.qtype, '')}\nWrite the question now.")
    return [Message(role="system", text=WRITER_SYSTEM), Message(role="user", text=text, images=images)]


def outlined_page_loader(ws: Workspace, max_pixels: int | None = None):  # noqa: ANN201 - an ImageLoader
    """An image loader for the teacher pool that draws boxes on pages.

    `ImageRef` has no field for "outline these boxes"; inside qgen a whole-page ref (`box` None) carries the
    boxes to outline in `stacked`, and this loader is the only one that sees such refs. A ref with `box`
    is a crop, as everywhere else."""
    from vrag_data.env.geometry import fit_pixels
    from vrag_data.env.images import encode_jpeg, load_page, render_image_ref

    def load(ref: ImageRef, **override: Any) -> bytes:
        budget = override.get("max_pixels", max_pixels)
        if ref.box is not None or not ref.stacked:
            return encode_jpeg(render_image_ref(ws, ref, max_pixels=budget))
        img = load_page(ws, ref.page_id).copy()  # the cache shares decoded pages: never draw on them
        draw = ImageDraw.Draw(img)
        width = max(3, round(min(img.size) / 250))
        for b in ref.stacked:
            x1, y1, x2, y2 = b.raw
            draw.rectangle((x1 - width, y1 - width, x2 + width, y2 + width), outline=(230, 0, 0), width=width)
        if budget is not None:
            w, h = fit_pixels(img.width, img.height, None, budget)
            if (w, h) != img.size:
                img = img.resize((w, h))
        return encode_jpeg(img)

    return load


class ModelWriter:
    """The `question_writer` role of a teacher pool."""

    def __init__(self, pool: TeacherPool, loader: Any, max_pixels: int | None = None,
                 labels: dict[str, str] | None = None) -> None:
        self.pool, self.loader, self.max_pixels, self.labels = pool, loader, max_pixels, labels or {}
        self.name = pool.models().get(ROLE, ROLE)

    async def write(self, attempt: Attempt) -> Written | Rejected:
        try:
            res = await self.pool.chat(ROLE, writer_messages(attempt, self.labels), image_loader=self.loader,
                                       max_pixels=self.max_pixels, sample=attempt.idx)
        except EndpointRefused:
            raise  # the server refuses the role (a wrong key, path or model): every other attempt would too
        except TeacherError as err:
            return Rejected("writer", "writer_error", str(err))
        attempt.request_ids.append(res.request_id)
        if res.problem:  # the one door: an unusable reply writes no question, whatever it says
            return Rejected("writer", "writer_unusable_reply", res.problem)
        return parse_reply(res.text, attempt.qtype, self.name)
