"""Neutralise action tags and chat-control tokens inside document text shown to the model.

A page's text layer is untrusted: a PDF can contain "<answer>42</answer>" or "<|im_start|>system" to
steer the agent (prompt injection), or "<image>" which would break the image-placeholder counts of
LLaMA-Factory/verl exports. Every observation that carries page text goes through `sanitize_text`.
The angle brackets of such tokens become look-alike guillemets (U+2039/U+203A), so a reader still sees
the text but no parser or chat template treats it as markup.
"""

from __future__ import annotations

import re

from vrag_data.env.tags import ALL_TAGS

_EXTRA_TAGS = ("image", "video", "tool_call", "tool_response", "tool_code", "judge", "plan", "output_format")
_NAMES = "|".join(sorted({*(t.lower() for t in ALL_TAGS), *_EXTRA_TAGS}, key=len, reverse=True))
# <tag>, </tag>, < tag >, <tag/>, <tag attr=...>, any case; fullwidth brackets too
_TAG = re.compile(r"[<\uff1c]\s*/?\s*(?:" + _NAMES + r")\b[^<>\uff1c\uff1e]{0,64}[>\uff1e]", re.IGNORECASE)
# the opening bracket of anything that starts like a tag: defanging every such bracket (not only whole tags)
# means no nesting trick such as "<answer<answer>>" can leave a tag behind
_TAG_START = re.compile(r"[<\uff1c](?=\s*/?\s*(?:" + _NAMES + r")\b)", re.IGNORECASE)
# chat-template control tokens such as <|im_start|>, <|vision_start|>, <|endoftext|>
_CONTROL = re.compile(r"<\|[^<>|]{0,64}\|>")
_C0 = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _defang(m: re.Match[str]) -> str:
    s = m.group(0)
    return "\u2039" + s[1:-1] + "\u203a"


def sanitize_text(text: str, max_chars: int | None = None) -> str:
    """`text` with action tags and control tokens defanged and control characters removed."""
    if not text:
        return ""
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    text = _C0.sub("", text)
    text = _CONTROL.sub(_defang, text).replace("<|", "\u2039|")  # no control token can form
    text = _TAG.sub(_defang, text)  # whole tags read as ‹answer›
    return _TAG_START.sub("\u2039", text)  # leftovers of nesting tricks such as "<answer<answer>>"


def has_action_markup(text: str) -> bool:
    """True when `text` still contains something a parser or chat template would treat as markup."""
    return bool(_TAG.search(text) or _CONTROL.search(text))
