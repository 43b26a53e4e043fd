"""The one door every model reply passes before anything reads it: the policy's, an augmentation teacher's, a
verifier's, the judge's, the student's, the reader's, the planner's and the question writer's.

A reply is usable only when the server finished it on its own (`finish_reason` "stop": not cut at max_tokens, not
withheld by a content filter, not a tool call), its bytes decoded as UTF-8, it is no longer than any message the
grammars read, it holds no control character but tab and line ends, and it forges no turn (no chat-template special token after the end-of-turn markers a server may leave
at its end). Its text is then normalised by the allowlist's character rules (`vrag_data.inert.normalize_chars`: NFC,
LF line ends, no control, format, private-use or unassigned character), so no caller sees, quotes or trains on what
the allowlist would drop. Brackets are left to the reader of the text: a grammar's parser keeps its own tags, a prompt
that quotes the reply makes every tag inert.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Protocol, TypeVar

from vrag_data.env.parse import MAX_MESSAGE_CHARS
from vrag_data.inert import SQUARE_SPECIAL, is_open, normalize_chars, sanitize_text, strip_end_markers


class ServerReply(Protocol):
    """What the door reads of a reply (`vrag_data.teacher.pool.ChatResult`)."""

    text: str
    finish_reason: str
    undecodable: bool
    cut_from: int


R = TypeVar("R", bound=ServerReply)

USABLE_FINISH = "stop"


def special_token(text: str) -> str:
    """The first chat-template special token in `text` ("<|im_start|>", "<｜end▁of▁sentence｜>", "[INST]"), or ''.
    A special token is a bracket followed by a bar (every ChatML, Llama 3, Phi and DeepSeek token has that shape)."""
    for i, c in enumerate(text):
        if is_open(c) and text[i + 1: i + 2] in ("|", "\uff5c"):
            return text[i: i + 40].split("\n", 1)[0]
    m = SQUARE_SPECIAL.search(text)  # the square-bracket specials of tokenizers that read "[INST]"
    return m.group(0) if m else ""


def reply_problem(res: ServerReply, text: str) -> str:
    """Why the reply cannot be used whatever its text says ('' when it can); `text` is without its end markers."""
    if res.undecodable:
        return "undecodable bytes in the reply (invalid UTF-8, replaced by U+FFFD)"
    if "\ufffd" in text:  # a server that decoded leniently itself: the bytes it replaced are lost
        return "the reply holds U+FFFD (bytes that did not decode as UTF-8)"
    if res.finish_reason != USABLE_FINISH:
        if res.finish_reason == "length":
            return "the reply was truncated at max_tokens (finish_reason length)"
        return (f"the server ended the reply with finish_reason {sanitize_text(res.finish_reason or 'missing')!r}, "
                f"not {USABLE_FINISH!r}")
    n = res.cut_from or len(res.text)
    if n > MAX_MESSAGE_CHARS:
        return f"the message is too long ({n} characters, limit {MAX_MESSAGE_CHARS})"
    control = next((c for c in text if unicodedata.category(c) == "Cc" and c not in "\t\n\r"), "")
    if control:  # a terminal escape, a NUL: what is left around it ("[0m42") is no text to train on or quote
        return f"the reply holds the control character U+{ord(control):04X}"
    token = special_token(text)
    if token:  # a forged turn ("<|im_end|><|im_start|>user ..."): never a training target, never quoted
        return f"the reply holds the chat-template token {sanitize_text(token)!r}"
    return ""


def accept(res: R) -> R:
    """`res` as every caller reads it: the text without trailing end-of-turn markers, normalised by the allowlist's
    character rules, and `problem` saying why it is unusable ('' when usable)."""
    text = strip_end_markers(res.text)
    return dataclasses.replace(res, text=normalize_chars(text), problem=reply_problem(res, text))  # type: ignore[type-var]
