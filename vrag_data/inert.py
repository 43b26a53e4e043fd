"""Neutralise action tags, chat-template tokens and active HTML inside outside text before it reaches a model,
a judge or a dataset.

Everything from outside is untrusted: a page's text layer, a table cell, a document's title or outline, a file
name, an imported question or gold answer, and a model reply that is quoted back into another prompt. Any of
them can carry "<answer>42</answer>", "<|im_start|>system", "[INST]", "<start_of_turn>", "<｜end▁of▁sentence｜>"
or "<script>" to steer the agent, forge a turn or break an export's image-placeholder counts. `sanitize_text`
makes such markup inert: its brackets become look-alike guillemets (U+2039/U+203A), so a reader still sees the
text but no parser, chat template or browser treats it as markup. It is idempotent.

`live_markup` finds what is still live in a text (the export gate refuses a training text that holds one outside
the positions its recipe's grammar puts them). Standard library only, at the bottom of the layers: records, prompts and the reward bundle use it.
"""

from __future__ import annotations

import re

# the tag names of every action grammar (the parser and the renderer read them from `vrag_data.env.tags`)
ALL_TAGS: tuple[str, ...] = ("think", "search", "select", "bbox", "region", "answer", "observe", "evidence", "read", "FINISH")
L, R = "\u2039", "\u203a"
# tags a model, a chat template or a consumer reads besides the action grammar's
_EXTRA_TAGS = ("image", "video", "tool_call", "tool_response", "tool_code", "judge", "plan", "output_format")
# HTML that runs or loads something when an export or a report is opened in a browser
_HTML_TAGS = ("script", "img", "iframe", "svg", "style", "object", "embed", "link", "meta", "base", "form", "input",
              "body", "html", "audio", "source", "math", "frame", "frameset", "applet", "details", "marquee")
# chat-template tokens written with plain angle brackets (Gemma, Llama 2, BOS/EOS of SentencePiece models)
_CHAT_WORDS = ("start_of_turn", "end_of_turn", "start_of_image", "end_of_image", "bos", "eos", "pad", "unk", "s", "sop",
               "eop", "mask")
_ACTION = "|".join(sorted({*(t.lower() for t in ALL_TAGS), *_EXTRA_TAGS}, key=len, reverse=True))
_HTML = "|".join(sorted(_HTML_TAGS, key=len, reverse=True))
_WORDS = "|".join(sorted(_CHAT_WORDS, key=len, reverse=True))
_OPEN, _CLOSE = "<\uff1c\ufe64", ">\uff1e\ufe65"  # ASCII, fullwidth and small-form angle brackets
# action tags: <tag>, </tag>, < tag >, <tag/>, <tag attr=...>, any case, any of the bracket forms
_TAG = re.compile(rf"[{_OPEN}]\s*/?\s*(?:{_ACTION})\b[^{_OPEN}{_CLOSE}]{{0,200}}[{_CLOSE}]", re.IGNORECASE)
# HTML as a browser reads it: the name right after "<" or "</" (so "x < base rate" stays as it is)
_HTML_TAG = re.compile(rf"[{_OPEN}]/?(?:{_HTML})\b[^{_OPEN}{_CLOSE}]{{0,200}}[{_CLOSE}]", re.IGNORECASE)
# chat-template words in angle brackets are tokens only exactly so: "<start_of_turn>", "</s>", "<eos>"
_WORD_TOKEN = re.compile(rf"[{_OPEN}]\s*/?\s*(?:{_WORDS})\s*[{_CLOSE}]", re.IGNORECASE)
# the opening bracket of anything that starts like a tag: defanging every such bracket (not only whole tags) means
# no nesting trick such as "<answer<answer>>" and no unclosed "<img src=x onerror=..." can leave markup behind
_TAG_START = re.compile(rf"[{_OPEN}](?=\s*/?\s*(?:{_ACTION})\b|/?(?:{_HTML})\b)", re.IGNORECASE)
# special tokens between bars: ChatML / Qwen / Llama 3 / Phi "<|im_start|>", DeepSeek "<｜end▁of▁sentence｜>"
_BARRED = re.compile(rf"[{_OPEN}]\s*[|\uff5c]([^{_OPEN}{_CLOSE}\n]{{0,80}}?)[|\uff5c]\s*[{_CLOSE}]")
_BAR_START = re.compile(rf"[{_OPEN}](?=\s*[|\uff5c])")
# Llama 2 / Mistral "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[TOOL_CALLS]", ...; GLM "[gMASK]"; "<<SYS>>"
_SQUARE = re.compile(r"\[\s*/?\s*(?:INST|SYS|SYSTEM_PROMPT|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|TOOL_CONTENT|IMG|"
                     r"IMG_BREAK|IMG_END|gMASK)\s*\]", re.IGNORECASE)
_SYS = re.compile(r"<<\s*/?\s*SYS\s*>>", re.IGNORECASE)
_C0 = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # C0 but tab/newline/CR, DEL, C1, surrogates


def _defang(m: re.Match[str]) -> str:
    s = m.group(0)
    return L + s[1:-1] + R


def _bars(m: re.Match[str]) -> str:
    return f"{L}\uff5c{m.group(1)}\uff5c{R}"  # the bars become fullwidth too: no "|" left to split a table cell on


def sanitize_text(text: str, max_chars: int | None = None) -> str:
    """`text` with action tags, chat-template tokens and active HTML made inert and control characters removed."""
    if not text:
        return ""
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    text = _C0.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _BARRED.sub(_bars, text)
    text = _BAR_START.sub(L, text)  # an unclosed "<|" can no longer open a special token
    text = _SQUARE.sub(_defang, text)
    text = _SYS.sub(lambda m: L + L + m.group(0)[2:-2] + R + R, text)
    text = _TAG.sub(_defang, text)  # whole tags read as ‹answer›
    text = _HTML_TAG.sub(_defang, text)
    text = _WORD_TOKEN.sub(_defang, text)
    return _TAG_START.sub(L, text)  # leftovers of nesting tricks such as "<answer<answer>>"


def inert_stem(stem: str) -> str:
    """A document's stem (its file name without the extension) as page ids, prompts and exports carry it: a file
    named "report<|im_start|>.pdf" must not put a live token into every page id of its document."""
    return sanitize_text(stem).replace("\n", " ")


# what the export gate calls live markup: every chat-template token form and active HTML (never legitimate in a
# training text), and the action tags (legitimate only where the recipe's grammar or its own prompts put them)
_HTML_START = re.compile(rf"[{_OPEN}]/?(?:{_HTML})\b", re.IGNORECASE)  # unclosed, a browser still reads it
_LIVE_CHAT = re.compile("|".join(p.pattern for p in (_BARRED, _SQUARE, _SYS, _WORD_TOKEN, _HTML_START)), re.IGNORECASE)
# image placeholders are written by the exporters themselves (and counted against the images there)
_LIVE_ACTION = re.compile(_TAG.pattern.replace(_ACTION, "|".join(t for t in _ACTION.split("|") if t not in ("image", "video"))),
                          re.IGNORECASE)


def live_chat_markup(text: str) -> str:
    """The first chat-template token or active HTML tag still live in `text` ('' when none)."""
    m = _LIVE_CHAT.search(text or "")
    return m.group(0)[:40] if m else ""


# end-of-turn markers a server leaves at the end of a reply when it decodes without skipping special tokens
_END_MARKERS = re.compile(r"(?:\s*(?:<\|(?:im_end|eot_id|endoftext|end|eom_id)\|>|</s>|<end_of_turn>|<eos>|"
                          r"<\uff5cend\u2581of\u2581sentence\uff5c>))+\s*$", re.IGNORECASE)


def strip_end_markers(text: str) -> str:
    """`text` without the end-of-turn tokens trailing it ("<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", ...)."""
    return _END_MARKERS.sub("", text or "")


def live_action_tags(text: str) -> list[str]:
    """Every action tag (or other model-facing tag) still live in `text`, in order."""
    return [m.group(0) for m in _LIVE_ACTION.finditer(text or "")]


def has_action_markup(text: str) -> bool:
    """True when `text` still contains something a parser, a chat template or a browser would treat as markup."""
    return bool(_TAG.search(text) or _TAG_START.search(text) or live_chat_markup(text) or _BAR_START.search(text))
