"""The action grammar's parser, pure and standard-library only: one assistant message -> (action kind, fields).

`vrag_data.env.actions.parse_action` wraps it into an `Action` record; the rewards read only the kind
(`action_kind`), so the reward entry points shipped with an export need nothing beyond the standard library.
Total: `parse_fields` never raises for any string and runs in linear time (inputs are capped at
`MAX_MESSAGE_CHARS`). Tag grammars are scanned once with a regex over the known tag names; unknown tags are plain
text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vrag_data.env.grammar import TAG_KIND, Grammar, grammar_for
from vrag_data.env.tags import ALL_TAGS
from vrag_data.inert import sanitize_text

MAX_MESSAGE_CHARS = 65_536  # teacher messages are a few KB; anything this long is runaway generation
MAX_TAGS = 64
MAX_BOXES = 8
MAX_INDICES = 32
MAX_KEYWORDS = 16
MAX_READS = 8
MAX_READ_PAGES = 16
MAX_QUERY_CHARS = 2_000


_TAG_RE = re.compile(r"<(/?)\s*(" + "|".join(t for t in ALL_TAGS if t != "FINISH") + r")\s*>|<\s*(FINISH)\s*/?\s*>", re.IGNORECASE)
_EVIDENCE_LINE = re.compile(r"\[(\d+)\]\s*:\s?(.*)")
_INDICES = re.compile(r"\[?\s*(\d{1,6}(?:\s*[,\s]\s*\d{1,6})*)\s*\]?")
_JSON_KEYS_ACTION = {"search": "search", "select": "select", "bbox": "bbox", "crop": "bbox", "region": "bbox", "answer": "answer", "read": "read", "finish": "FINISH"}
_TAG_KIND = TAG_KIND


Parsed = tuple[str, dict[str, Any]]  # (action kind, the Action's fields); kind "invalid" carries {"reason": ...}


class _Bad(Exception):
    """Internal: a parse failure carrying the reason shown to the model."""


def invalid_fields(reason: str) -> Parsed:
    return "invalid", {"reason": reason}


def parse_fields(text: str, grammar: Grammar | str) -> Parsed:
    """Parse one assistant message under `grammar` (an object, or a registered name) into (kind, fields): the
    `Action` record's kind and keyword arguments (`reads` as plain dicts). Raises only for an unknown grammar name
    (a caller bug)."""
    g = grammar_for(grammar)
    if not isinstance(text, str):
        return invalid_fields("the message is not text")
    if len(text) > MAX_MESSAGE_CHARS:
        return invalid_fields(f"the message is too long ({len(text)} characters, limit {MAX_MESSAGE_CHARS})")
    if not text.strip():
        return invalid_fields("empty message")
    try:
        if g.json:
            return _parse_json(text)
        return _parse_tags(text, g)
    except _Bad as bad:
        return invalid_fields(str(bad))
    except (RecursionError, MemoryError, ValueError, TypeError) as err:  # defensive: never let model text escape
        return invalid_fields(f"unparseable message ({type(err).__name__})")


def action_kind(text: str, grammar: Grammar | str) -> str:
    """The kind of action `text` holds under `grammar` ("invalid" when it breaks the grammar)."""
    return parse_fields(text, grammar)[0]


# --------------------------------------------------------------------------- tag grammars


def _scan(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Blocks (tag, content) in order, and the text outside them: before the first block, between blocks, after the
    last (one more part than blocks)."""
    blocks: list[tuple[str, str]] = []
    outside: list[str] = []
    open_tag: str | None = None
    start = 0
    last = 0
    n = 0
    for m in _TAG_RE.finditer(text):
        n += 1
        if n > MAX_TAGS:
            raise _Bad(f"too many tags (more than {MAX_TAGS}); send exactly one action")
        if m.group(3):  # <FINISH>
            if open_tag is not None:
                raise _Bad(f"<FINISH> inside <{open_tag}>")
            outside.append(text[last : m.start()])
            blocks.append(("FINISH", ""))
            last = m.end()
            continue
        closing, name = m.group(1) == "/", m.group(2).lower()
        if not closing:
            if open_tag is not None:
                raise _Bad(f"nested <{name}> inside <{open_tag}>; tags must not be nested")
            outside.append(text[last : m.start()])
            open_tag, start = name, m.end()
        else:
            if open_tag is None:
                raise _Bad(f"</{name}> without a matching <{name}>")
            if name != open_tag:
                raise _Bad(f"<{open_tag}> is closed by </{name}>")
            blocks.append((name, text[start : m.start()]))
            open_tag, last = None, m.end()
    if open_tag is not None:
        raise _Bad(f"unclosed <{open_tag}> (the message may be truncated)")
    outside.append(text[last:])
    return blocks, outside


def _outside_text(outside: list[str], names: list[str], g: Grammar) -> str:
    """The reasoning written as plain text before the first tag (the message's thought when it has no <think> block),
    or "". Any other text outside the grammar's tags is no part of the format: a tool-call block, a look-alike or
    foreign tag, a second answer in prose after the action. The model never trains on it and the environment never
    acts on it, so the message is refused (the error names what to send)."""
    lead = outside[0].strip()
    if lead and (g.ordered or "think" in names):
        raise _Bad(f"text outside the tags ({_quote(lead)}); send only the format's tags")
    rest = next((x.strip() for x in outside[1:] if x.strip()), "")
    if rest:
        raise _Bad(f"text outside the tags ({_quote(rest)}); send only the format's tags, nothing after the action")
    return lead


def _quote(text: str) -> str:
    """The start of a text outside the tags, quoted inert for the error prompt (no markup of it goes back live)."""
    one = " ".join(text.split())
    return repr(sanitize_text(one[:40] + ("..." if len(one) > 40 else "")))


def _parse_tags(text: str, g: Grammar) -> Parsed:
    blocks, outside = _scan(text)
    names = [b[0] for b in blocks]
    for name in names:
        if name not in g.tags:
            legal = ", ".join(f"<{t}>" for t in sorted(g.tags))
            raise _Bad(f"<{name}> is not part of the {g.name} format (allowed: {legal})")
    for name, content in blocks:
        if name != "FINISH" and not content.strip():
            raise _Bad(f"empty <{name}>")
    if g.ordered:
        if names != list(g.ordered):
            want = " ".join(f"<{t}>" for t in g.ordered)
            missing = [t for t in g.ordered if t not in names]
            detail = f"missing <{missing[0]}>" if missing else "tags repeated or out of order"
            raise _Bad(f"{detail}; expected {want}, each exactly once and in this order")
    if names.count("think") > 1:
        raise _Bad("more than one <think> block; think once, then act")
    acts = [(i, n) for i, n in enumerate(names) if n in g.actions]
    if not acts:
        legal = ", ".join(f"<{t}>" for t in sorted(g.actions))
        raise _Bad(f"no action found; end the message with exactly one of {legal}")
    if len(acts) > 1:
        raise _Bad(f"{len(acts)} actions in one message (<{acts[0][1]}> and <{acts[1][1]}>); send exactly one")
    act_i, act = acts[0]
    if "think" in names and names.index("think") > act_i:
        raise _Bad("<think> must come before the action")
    if g.think_required and "think" not in names:
        raise _Bad("missing <think> block; start every response with <think>...</think>")
    lead = _outside_text(outside, names, g)
    content = dict(blocks)
    thought = content["think"].strip() if "think" in content else lead  # reasoning written as plain text before the tag
    fields: dict[str, Any] = {"thought": thought}
    if g.ordered:
        fields["observe"] = content["observe"].strip()
        fields["evidence"] = _evidence_lines(content["evidence"])
    fields.update(_action_fields(act, content.get(act, ""), g))
    return _TAG_KIND[act], fields


def _action_fields(tag: str, raw: str, grammar: Grammar) -> dict[str, Any]:
    body = raw.strip()
    if tag == "search":
        if grammar.keyword_search:
            return {"keywords": _keywords(_json(body, "<search>"))}
        if len(body) > MAX_QUERY_CHARS:
            raise _Bad(f"search query too long ({len(body)} characters, limit {MAX_QUERY_CHARS})")
        return {"query": body}
    if tag == "select":
        return {"indices": _indices(body)}
    if tag in ("bbox", "region"):
        return {"boxes": _boxes(_json(body, f"<{tag}>"))}
    if tag == "read":
        return _reads(_json(body, "<read>"))
    if tag == "answer":
        return {"answer": body}
    return {}  # FINISH


def _evidence_lines(body: str) -> list[str]:
    lines: list[str] = []
    for raw in body.strip().splitlines():
        m = _EVIDENCE_LINE.match(raw.strip())
        if m:
            if int(m.group(1)) != len(lines) + 1:
                raise _Bad(f"evidence lines must be numbered [1], [2], ... in order; found [{m.group(1)}] after {len(lines)} line(s)")
            lines.append(m.group(2).strip())
        elif not lines:
            raise _Bad("each <evidence> line must start with [i]: (i = image number)")
        elif raw.strip():
            lines[-1] = f"{lines[-1]}\n{raw.strip()}"
    if not lines:
        raise _Bad("empty <evidence>")
    if any(not x for x in lines):
        raise _Bad("an evidence line is empty; write [i]: no relevant information when an image has nothing")
    return lines


# --------------------------------------------------------------------------- contents


def _reject_constant(name: str) -> Any:
    raise _Bad(f"{name} is not a number")


def _json(body: str, where: str) -> Any:
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise _Bad(f"{where} does not hold valid JSON ({err.msg} at character {err.pos})") from None
    except RecursionError:
        raise _Bad(f"{where} holds JSON nested too deeply") from None


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _box(v: Any) -> list[float]:
    if isinstance(v, dict) and "bbox_2d" in v:  # Qwen grounding's own JSON shape
        v = v["bbox_2d"]
    if not isinstance(v, list) or len(v) != 4 or not all(_is_num(x) for x in v):
        raise _Bad("a box must be four numbers [x1, y1, x2, y2]")
    out = [float(x) for x in v]
    if any(x != x or x in (float("inf"), float("-inf")) for x in out):
        raise _Bad("a box contains a non-finite number")
    return out


def _boxes(v: Any) -> list[list[float]]:
    if isinstance(v, list) and v and all(_is_num(x) for x in v):
        return [_box(v)]
    if isinstance(v, dict):
        return [_box(v)]
    if not isinstance(v, list) or not v:
        raise _Bad("expected a box [x1, y1, x2, y2] or a list of boxes")
    if len(v) > MAX_BOXES:
        raise _Bad(f"too many boxes ({len(v)}, limit {MAX_BOXES})")
    return [_box(b) for b in v]


def _indices(body: str) -> list[int]:
    m = _INDICES.fullmatch(body)
    if not m:
        raise _Bad("<select> must hold image numbers, e.g. [1, 3]")
    vals = [int(x) for x in re.split(r"[,\s]+", m.group(1).strip()) if x]
    if len(vals) > MAX_INDICES:
        raise _Bad(f"too many indices ({len(vals)}, limit {MAX_INDICES})")
    if len(set(vals)) != len(vals):
        raise _Bad("<select> repeats an index")
    return vals


def _keywords(v: Any) -> list[str]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise _Bad('<search> must hold a JSON list of keywords, e.g. ["revenue", "2023"]')
    kws = [x.strip() for x in v]
    if any(not k for k in kws):
        raise _Bad("<search> holds an empty keyword")
    if len(kws) > MAX_KEYWORDS or any(len(k) > MAX_QUERY_CHARS for k in kws):
        raise _Bad(f"too many or too long keywords (limit {MAX_KEYWORDS})")
    return kws


def _page_id(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:
            raise _Bad(f"page number {v} is not valid (pages start at 1)")
        return str(v)
    if isinstance(v, str) and v.strip():
        return v.strip()
    raise _Bad("page_ids must hold page numbers or page ids")


def _reads(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        v = [v]
    if not isinstance(v, list) or not v:
        raise _Bad('<read> must hold a JSON list like [{"page_ids": [4, 5], "query": "..."}]')
    if len(v) > MAX_READS:
        raise _Bad(f"too many read requests ({len(v)}, limit {MAX_READS})")
    reads: list[dict[str, Any]] = []
    for item in v:
        if not isinstance(item, dict) or set(item) != {"page_ids", "query"}:
            raise _Bad('each <read> entry needs exactly the keys "page_ids" and "query"')
        pages, query = item["page_ids"], item["query"]
        if not isinstance(pages, list) or not pages or len(pages) > MAX_READ_PAGES:
            raise _Bad(f'"page_ids" must be a non-empty list of at most {MAX_READ_PAGES} pages')
        if not isinstance(query, str) or not query.strip():
            raise _Bad('"query" must be a non-empty string')
        reads.append({"page_ids": [_page_id(p) for p in pages], "query": query.strip()})
    page_ids: list[str] = []
    for r in reads:
        page_ids.extend(p for p in r["page_ids"] if p not in page_ids)
    return {"reads": reads, "page_ids": page_ids, "query": reads[0]["query"] if len(reads) == 1 else ""}


# --------------------------------------------------------------------------- JSON grammar


def _parse_json(text: str) -> Parsed:
    body = text.strip()
    if body.startswith("```"):
        body = re.sub(r"^```[a-zA-Z]*\s*", "", body)
        body = re.sub(r"\s*```$", "", body)
    i, j = body.find("{"), body.rfind("}")
    if i < 0 or j < i:
        raise _Bad("expected one JSON object such as {\"think\": \"...\", \"search\": \"...\"}")
    if body[:i].strip() or body[j + 1 :].strip():
        raise _Bad(f"text outside the JSON object ({_quote((body[:i] + ' ' + body[j + 1 :]).strip())}); send one object only")
    obj = _json(body[i : j + 1], "the message")
    if not isinstance(obj, dict):
        raise _Bad("expected one JSON object")
    unknown = sorted(set(obj) - set(_JSON_KEYS_ACTION) - {"think", "page_id"})
    if unknown:
        raise _Bad(f"unknown key(s) {unknown}; use think plus one of {sorted(_JSON_KEYS_ACTION)}")
    acts = [k for k in obj if k in _JSON_KEYS_ACTION]
    if not acts:
        raise _Bad(f"no action key; add exactly one of {sorted(_JSON_KEYS_ACTION)}")
    if len(acts) > 1:
        raise _Bad(f"{len(acts)} actions in one message ({acts[0]} and {acts[1]}); send exactly one")
    key = acts[0]
    tag = _JSON_KEYS_ACTION[key]
    think = obj.get("think", "")
    if not isinstance(think, str):
        raise _Bad('"think" must be a string')
    val = obj[key]
    fields: dict[str, Any] = {"thought": think.strip()}
    if tag == "search":
        if isinstance(val, list):
            fields["keywords"] = _keywords(val)
        elif isinstance(val, str) and val.strip():
            if len(val.strip()) > MAX_QUERY_CHARS:
                raise _Bad(f"search query too long ({len(val.strip())} characters, limit {MAX_QUERY_CHARS})")
            fields["query"] = val.strip()
        else:
            raise _Bad('"search" must be a non-empty string or a list of keywords')
    elif tag == "select":
        if isinstance(val, int) and not isinstance(val, bool):
            val = [val]
        if not isinstance(val, list) or not val or not all(isinstance(x, int) and not isinstance(x, bool) for x in val):
            raise _Bad('"select" must be a list of image numbers')
        fields["indices"] = _indices(", ".join(str(x) for x in val))
    elif tag == "bbox":
        fields["boxes"] = _boxes(val)
    elif tag == "read":
        fields.update(_reads(val))
    elif tag == "answer":
        if not isinstance(val, (str, int, float)) or isinstance(val, bool) or not str(val).strip():
            raise _Bad('"answer" must be a non-empty string')
        fields["answer"] = str(val).strip()
    elif tag == "FINISH" and val not in (True, 1, "true", ""):
        raise _Bad('"finish" must be true')
    if "page_id" in obj:
        if tag != "bbox" or not isinstance(obj["page_id"], (str, int)) or isinstance(obj["page_id"], bool):
            raise _Bad('"page_id" is only valid with "bbox" and must be a page id')
        fields["page_ids"] = [_page_id(obj["page_id"])]
    return _TAG_KIND[tag], fields
