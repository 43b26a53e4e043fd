"""One normalisation for every text from outside and every model reply, by an allowlist.

Everything from outside is untrusted: a page's text layer, a table cell, a document's title or outline, a file name,
an imported question or gold answer, and a model reply that is trained on or quoted back into another prompt. What
such a text may hold is defined by what is allowed, never by a list of known bad forms:

- characters: NFC; CRLF and CR become LF; every character of the categories Cc (but tab and newline), Co (private
  use), Cn (unassigned) and Cs (surrogates) is dropped, and so is every Cf (format: zero-width spaces, bidi controls,
  tag characters, the BOM, soft hyphens) but ZWJ / ZWNJ between two letters (Persian and Indic scripts need them);
- brackets: a `<`, or any character that folds to `<` under NFKC (fullwidth, small form), or an angle-bracket
  look-alike, that opens something (a letter of any script, `/`, `!`, `?`, `|`, `_`, `[` right after it, or a word
  closed by `>` after spaces) is made inert unless the text's own grammar allows that exact tag (`allowed`): it
  becomes U+2039, and the bracket closing it U+203A. A reader still sees the text; no parser, chat template or
  browser treats it as markup. `x < 5`, `a <= b` and `<0.5` stay as they are;
- entities: an HTML entity that decodes to a bracket or a dropped character is decoded first, so `&lt;answer&gt;`
  and `&#8203;` meet the same rules as the characters they stand for.

`sanitize_text` is idempotent: `sanitize_text(sanitize_text(x)) == sanitize_text(x)`, so "would this text change
under it" is the export gate's test of a clean text. Standard library only, at the bottom of the layers: records,
prompts and the reward bundle use it.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterable

# the tag names of every action grammar (the parser and the renderer read them from `vrag_data.env.tags`)
ALL_TAGS: tuple[str, ...] = ("think", "search", "select", "bbox", "region", "answer", "observe", "evidence", "read", "FINISH")
L, R = "\u2039", "\u203a"  # what an inert bracket becomes
_ZW_JOINERS = frozenset("\u200c\u200d")
_DROP_CATEGORIES = frozenset({"Cc", "Co", "Cn", "Cs", "Cf"})
_LINE_BREAKS = {"\u2028": "\n", "\u2029": "\n", "\x85": "\n"}  # line / paragraph separators and NEL read as newlines
# angle-bracket look-alikes that NFKC does not fold (single and double angles of other blocks, modifier letters,
# Canadian syllabics): a tag written with them is a look-alike tag, made inert like any other
_OPEN_LIKE = frozenset("\u02c2\u1438\u2329\u27e8\u3008\u276e\u29fc\u2770\u300a\u27ea")
_CLOSE_LIKE = frozenset("\u02c3\u1433\u232a\u27e9\u3009\u276f\u29fd\u2771\u300b\u27eb")
_OPENERS_AFTER = frozenset("/!?|_[\uff5c")  # what opens markup right after a bracket besides a letter
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_SPACE_TAG = re.compile(r"[ \t]+/?[ \t]*[^\W\d][\w.:-]{0,40}[ \t]*/?[ \t]*")  # "< answer >", "< /think >"
_TAG_NAME = re.compile(r"[ \t]*(/?)[ \t]*([A-Za-z][A-Za-z0-9_]*)[ \t]*(/?)[ \t]*")
_MAX_TAG = 200  # a bracket closes what it opened within this many characters, on the same line
# Llama 2 / Mistral "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[TOOL_CALLS]", ...; GLM "[gMASK]": special tokens of
# tokenizers that read square brackets
SQUARE_SPECIAL = _SQUARE = re.compile(r"\[\s*/?\s*(?:INST|SYS|SYSTEM_PROMPT|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|TOOL_CONTENT|IMG|"
                     r"IMG_BREAK|IMG_END|gMASK)\s*\]", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _folds_to(c: str) -> str:
    return unicodedata.normalize("NFKC", c)


def is_open(c: str) -> bool:
    """`c` is an opening angle bracket: `<`, whatever NFKC folds to it, or a look-alike."""
    return c == "<" or (c > "\x7f" and (c in _OPEN_LIKE or _folds_to(c) == "<"))


def is_close(c: str) -> bool:
    return c == ">" or (c > "\x7f" and (c in _CLOSE_LIKE or _folds_to(c) == ">"))


def _letter(c: str) -> bool:
    return unicodedata.category(c)[0] in "LM"


def allowed_char(text: str, i: int) -> bool:
    """The character at `i` is of an allowed category (a ZWJ / ZWNJ only between two letters)."""
    c = text[i]
    if c in "\t\n":
        return True
    cat = unicodedata.category(c)
    if cat not in _DROP_CATEGORIES:
        return True
    return c in _ZW_JOINERS and 0 < i < len(text) - 1 and _letter(text[i - 1]) and _letter(text[i + 1])


def normalize_chars(text: str) -> str:
    """NFC, LF line ends, and no character outside the allowed categories (see the module doc)."""
    if not text:
        return ""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    if text.isascii():
        return text if text.isprintable() else "".join(c for c in text if " " <= c < "\x7f" or c in "\t\n")
    text = "".join(_LINE_BREAKS.get(c, c) for c in text)
    kept = "".join(c for i, c in enumerate(text) if allowed_char(text, i))
    if kept != text:  # dropping a joiner's neighbour can leave a joiner between non-letters: one more pass
        kept = "".join(c for i, c in enumerate(kept) if allowed_char(kept, i))
    return unicodedata.normalize("NFC", kept)


def _entity(m: re.Match[str]) -> str:
    """An entity that stands for a dropped character is dropped; one that stands for a bracket that would open markup
    becomes the inert bracket at once (so no entity can turn into a tag the text's grammar allows), one for a closing
    bracket becomes `>`; any other entity stays as written."""
    s = m.group(0)
    d = html.unescape(s)
    if d == s or not d:
        return s
    if len(d) == 1 and is_open(d):
        rest = m.string[m.end(): m.end() + _MAX_TAG]
        return L if _opens("<" + _ENTITY.sub(lambda e: html.unescape(e.group(0)), rest), 0) else s
    if len(d) == 1 and is_close(d):
        return ">"
    if any(unicodedata.category(c) in _DROP_CATEGORIES and c not in "\t\n" for c in d):
        return d  # dropped with the characters it stands for
    return s


def _opens(text: str, i: int) -> bool:
    """The bracket at `i` opens markup: a letter or an opener right after it, or a word closed by a bracket after spaces.
    (Of a run of brackets only the last can open: "<<SYS>>" reads "<" then an inert "<SYS>".)"""
    j = i + 1
    if j >= len(text):
        return False
    c = text[j]
    if _letter(c) or c in _OPENERS_AFTER:
        return True
    m = _SPACE_TAG.match(text, j)
    return bool(m and m.end() < len(text) and is_close(text[m.end()]))


def _allowed_tag(text: str, i: int, allowed: frozenset[str]) -> int:
    """The end of the tag at `i` when it is an ASCII tag the grammar allows (`<name>`, `</name>`, `<name/>`), else -1."""
    if not allowed or text[i] != "<":
        return -1
    m = _TAG_NAME.match(text, i + 1)
    if not m or m.end() >= len(text) or text[m.end()] != ">" or (m.group(1) and m.group(3)):
        return -1
    return m.end() + 1 if m.group(2) in allowed else -1


def _closing(text: str, i: int) -> int:
    """The bracket that closes what the bracket at `i` opened (-1 when none within reach on its line)."""
    for j in range(i + 1, min(len(text), i + 1 + _MAX_TAG)):
        c = text[j]
        if c == "\n" or (is_open(c) and _opens(text, j)):
            return -1
        if is_close(c):
            return j
    return -1


def make_brackets_inert(text: str, allowed: frozenset[str] = frozenset()) -> str:
    """Every bracket that opens markup made inert, but the ASCII tags in `allowed` (see the module doc)."""
    if not any(is_open(c) for c in text):
        return text
    out: list[str] = []
    close_at: set[int] = set()
    i = 0
    while i < len(text):
        c = text[i]
        if i in close_at:
            out.append(R)
        elif is_open(c):
            end = _allowed_tag(text, i, allowed)
            if end >= 0:
                out.append(text[i:end])
                i = end
                continue
            if _opens(text, i):
                out.append(L)
                j = _closing(text, i)
                if j >= 0:
                    close_at.add(j)
            else:
                out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out).replace(L + "|", L + "\uff5c").replace("|" + R, "\uff5c" + R)


def sanitize_text(text: str, max_chars: int | None = None, allowed: Iterable[str] = ()) -> str:
    """`text` by the allowlist: allowed characters only, LF line ends, NFC, every bracket that opens markup inert
    but the ASCII tags named in `allowed` (a recipe's own prompts name its grammar's tags). Idempotent."""
    if not text:
        return ""
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    if "&" in text:
        text = _ENTITY.sub(_entity, text)
    text = normalize_chars(text)
    text = _SQUARE.sub(lambda m: L + m.group(0)[1:-1] + R, text)
    return make_brackets_inert(text, frozenset(allowed))


def is_clean(text: str, allowed: Iterable[str] = ()) -> bool:
    """`text` would not change under the allowlist (the export gate's test)."""
    return sanitize_text(text, allowed=allowed) == text


def first_change(text: str, allowed: Iterable[str] = ()) -> str:
    """What the allowlist changes first in `text`, described in one short phrase ('' when nothing)."""
    clean = sanitize_text(text, allowed=allowed)
    if clean == text:
        return ""
    i = next((k for k, (a, b) in enumerate(zip(text, clean)) if a != b), min(len(text), len(clean)))
    c = text[i] if i < len(text) else ""
    what = f"U+{ord(c):04X} ({unicodedata.category(c)})" if c else "the end"
    return f"{what} at character {i} near {sanitize_text(text[max(0, i - 12): i + 12])!r}"


def inert_stem(stem: str) -> str:
    """A document's stem (its file name without the extension) as page ids, prompts and exports carry it: a file
    named "report<|im_start|>.pdf" must not put a live token into every page id of its document."""
    return sanitize_text(stem).replace("\n", " ")


# end-of-turn markers a server leaves at the end of a reply when it decodes without skipping special tokens
_END_MARKERS = re.compile(r"(?:\s*(?:<\|(?:im_end|eot_id|endoftext|end|eom_id)\|>|</s>|<end_of_turn>|<eos>|"
                          r"<\uff5cend\u2581of\u2581sentence\uff5c>))+\s*$", re.IGNORECASE)


def strip_end_markers(text: str) -> str:
    """`text` without the end-of-turn tokens trailing it ("<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", ...)."""
    return _END_MARKERS.sub("", text or "")


def _bracket_entity(m: re.Match[str]) -> str:
    """An entity for a bracket as a bracket no grammar allows (the fullwidth forms): `&lt;answer&gt;` is markup to
    find even where `<answer>` is allowed."""
    d = html.unescape(m.group(0))
    if len(d) == 1 and is_open(d):
        return "\uff1c"
    return "\uff1e" if len(d) == 1 and is_close(d) else m.group(0)


def live_markup(text: str, allowed: Iterable[str] = ()) -> str:
    """The first piece of markup still live in `text` beyond the `allowed` tags ('' when none)."""
    allow = frozenset(allowed)
    text = _ENTITY.sub(_bracket_entity, text) if "&" in (text or "") else (text or "")
    for i, c in enumerate(text):
        if is_open(c) and _allowed_tag(text, i, allow) < 0 and _opens(text, i):
            j = _closing(text, i)
            return text[i: (j + 1 if j >= 0 else i + 40)][:40]
    m = _SQUARE.search(text)
    return m.group(0)[:40] if m else ""


def live_chat_markup(text: str) -> str:
    """The first markup still live in `text` that is no action tag of any grammar and no image placeholder ('' when
    none): a chat-template token, HTML, a look-alike or foreign tag."""
    return live_markup(text, _GRAMMAR_TAGS)


_GRAMMAR_TAGS = frozenset({*ALL_TAGS, "image", "judge"})  # the tags of the project's own prompts (the judge's verdict)


def live_action_tags(text: str) -> list[str]:
    """Every piece of markup still live in `text`, in order (no tag is allowed in it)."""
    found: list[str] = []
    rest = text or ""
    while True:
        m = live_markup(rest)
        if not m:
            return found
        found.append(m)
        rest = rest[rest.index(m) + len(m):]


def has_action_markup(text: str) -> bool:
    """True when `text` still holds something a parser, a chat template or a browser would treat as markup."""
    return bool(live_markup(text))
