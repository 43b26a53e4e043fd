"""One JSON document read row by row: a list of rows (`[...]`) or an object whose `examples` / `data` / `samples`
list holds them, decoded as the bytes come, so memory holds one row at a time rather than the whole file (a 500 MB
array used to be parsed whole: minutes and gigabytes).

The rows are decoded by the standard library's `json.JSONDecoder.raw_decode`, one value at a time, over a text
buffer that grows only while a value is incomplete. A document that starts with `{` may instead be JSON lines
whose first row is an object: `ObjectStart` says so, with the bytes read so far, and the caller reads them again as
lines.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO, Any

from vrag_data.errors import VragError
from vrag_data.tasks.formats import RowError

CHUNK = 1 << 20
WS = " \t\r\n"
_NOT_WS = re.compile(r"[^ \t\r\n]")
_DECODER = json.JSONDecoder()


def mib(n: int) -> str:
    return f"{n / 2**20:.4g} MiB" if n >= 2**20 else f"{n} bytes"


FIX_CAP = "split the file or raise the cap (tasks import --max-bytes BYTES)"


class ObjectStart(Exception):
    """The file starts with an object that is not a document holding rows (JSON lines, or a bad first line): read
    it again as lines from `replay` (every byte taken from the stream so far)."""

    def __init__(self, replay: bytes) -> None:
        super().__init__("not one document")
        self.replay = replay


class Text:
    """The text of a byte stream, decoded as it is needed: `buf[pos:]` is not consumed yet. While `keep` is set the
    raw bytes read are kept too (`replay`)."""

    def __init__(self, f: IO[bytes], file: str, max_bytes: int) -> None:
        self.f, self.file, self.max_bytes = f, file, max_bytes
        self.buf, self.pos, self.total, self.eof = "", 0, 0, False
        self.keep, self.replay = True, bytearray()
        self.rows = 0  # rows handed out, for the messages
        self._dec = codecs.getincrementaldecoder("utf-8")()

    def more(self) -> bool:
        """Read on (at least as much as is pending, so an incomplete value is decoded again O(1) times on average);
        False at the end of the stream."""
        if self.eof:
            return False
        # read1: what has come (a pipe's first rows are read before its writer is done), at most one buffer's worth
        chunk = getattr(self.f, "read1", self.f.read)(max(CHUNK, len(self.buf) - self.pos))
        if self.total == 0 and b"\x00" in chunk:
            raise VragError(f"{self.file}: holds NUL bytes, so it is not a UTF-8 text file (binary, UTF-16 or a "
                            "device); pass a .json or .jsonl annotation file saved as UTF-8")
        self.total += len(chunk)
        if self.total > self.max_bytes:
            raise VragError(f"{self.file}: more than the import cap of {mib(self.max_bytes)} came from it "
                            f"(stopped after row {self.rows}); {FIX_CAP}")
        if self.keep:
            self.replay += chunk
        try:
            text = self._dec.decode(chunk, final=not chunk)
        except UnicodeDecodeError as err:
            raise RowError(f"not UTF-8 text (byte 0x{err.object[err.start]:02x})") from None
        if self.total == len(chunk):
            text = text.removeprefix("\ufeff")  # editors on Windows write one
        self.buf, self.pos = self.buf[self.pos:] + text, 0
        self.eof = not chunk
        return bool(chunk)

    def peek(self) -> str | None:
        """The next character that is not white space (not consumed), None at the end."""
        while True:
            m = _NOT_WS.search(self.buf, self.pos)
            if m is not None:
                self.pos = m.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self.more():
                return None

    def take(self, expected: str, after: str) -> str:
        """Consume the next character, one of `expected`; RowError naming `after` otherwise."""
        c = self.peek()
        if c is None or c not in expected:
            got = "the end of the file" if c is None else repr(c)
            raise RowError(f"not valid JSON (expected {' or '.join(map(repr, expected))} after {after}, got {got})")
        self.pos += 1
        return c

    def value(self) -> Any:
        """The next JSON value, consumed; RowError when it is not valid JSON."""
        self.peek()
        while True:
            try:
                val, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                if self._incomplete(err) and self.more():
                    continue
                raise RowError(f"not valid JSON ({err.msg})") from None
            except RecursionError:
                raise RowError("not usable JSON (nested too deeply)") from None
            except ValueError as err:  # an integer of more than 4300 digits
                raise RowError(f"not usable JSON ({str(err).split(';')[0]})") from None
            # a number cut by the buffer's end ("12" of "123", "1e" of "1e5") decodes: read on to be sure
            if (end >= len(self.buf) or self.buf[end] not in WS + ",]}:") and not self.eof and self.more():
                continue
            self.pos = end
            return val

    def _incomplete(self, err: json.JSONDecodeError) -> bool:
        """Whether the error may only mean that the buffer ends inside the value."""
        return err.msg.startswith("Unterminated string") or err.pos >= len(self.buf) - 6


def stream_rows(text: Text) -> Iterator[tuple[str, Any]]:
    """("row N", row) of the document `text` holds; raises ObjectStart (nothing yielded) when it starts with an
    object that holds no list of rows or is followed by more JSON, and RowError when it is not valid JSON."""
    first = text.peek()
    if first == "[":
        text.keep, text.replay = False, bytearray()
        text.pos += 1
        yield from _items(text)
    else:
        yield from _object_rows(text)
    if text.peek() is not None:
        raise RowError(f"not valid JSON (more JSON after the document that ends after row {text.rows})")


def _items(text: Text) -> Iterator[tuple[str, Any]]:
    """The items of a list whose `[` is consumed, up to its `]` (consumed)."""
    if text.peek() == "]":
        text.pos += 1
        return
    while True:
        row = text.value()
        text.rows += 1
        yield f"row {text.rows}", row
        if text.take(",]", f"row {text.rows}") == "]":
            return


def _object_rows(text: Text) -> Iterator[tuple[str, Any]]:
    """The rows of an object document: the items of its first `examples` / `data` / `samples` list as they come,
    else the object itself as one row when nothing follows it."""
    try:
        text.take("{", "the start of the file")
        obj: dict[str, Any] = {}
        rows_key = ""
        while text.peek() != "}" or obj:  # `{}`; else a key, even after a `,`
            key = text.value()
            if not isinstance(key, str):
                raise RowError("not valid JSON (an object key is not a string)")
            text.take(":", f"the key {key[:40]!r}")
            if key in WRAPPER_KEYS and text.peek() == "[" and not rows_key:
                rows_key, text.keep, text.replay = key, False, bytearray()  # a document: its rows stream from here
                text.pos += 1
                yield from _items(text)
            elif key in WRAPPER_KEYS and text.peek() == "[":
                raise VragError(f"{text.file}: holds both a {rows_key!r} and a {key!r} list of rows; keep one")
            else:
                obj[key] = text.value()
            obj.setdefault(key, None)
            if text.take(",}", f"the value of {key[:40]!r}") == "}":
                break
        else:
            text.pos += 1  # the `}` of `{}`
    except RowError:
        if text.keep:  # nothing yielded: perhaps JSON lines whose first line is bad
            raise ObjectStart(bytes(text.replay)) from None
        raise
    if not rows_key:
        if text.peek() is not None:  # JSON lines: the first row was an object
            raise ObjectStart(bytes(text.replay))
        text.rows = 1
        yield "row 1", obj


WRAPPER_KEYS = ("examples", "data", "samples")  # {"examples": [...]}: VRAG-RL's rag_dataset.json and kin
