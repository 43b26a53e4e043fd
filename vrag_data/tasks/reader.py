"""Reading an annotation file with bounded memory: one JSON document (a list of rows, or an object holding one)
or JSON lines.

A file larger than the byte cap (`tasks import --max-bytes`) is refused before it is read; a stream (a pipe, a
device) stops when that many bytes have come. JSON lines are read one at a time: a line longer than the line cap
(`--max-line-bytes`), one that is not UTF-8 or not JSON becomes a RowError placeholder that the importer
reports with its line number, so one bad line never stops the import. The first non-blank line is not held to
the line cap, since a one-line JSON document (a minified `rag_dataset.json`) is common; the byte cap bounds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import fsspec
from fsspec.core import url_to_fs

from vrag_data.errors import VragError
from vrag_data.tasks.formats import RowError
from vrag_data.tasks.stream import ObjectStart, Text, stream_rows

CHUNK = 1 << 20
WRAPPER_KEYS = ("examples", "data", "samples")  # {"examples": [...]}: VRAG-RL's rag_dataset.json and kin
FIX_CAP = "split the file or raise the cap (tasks import --max-bytes BYTES)"


def _mib(n: int) -> str:
    return f"{n / 2**20:.4g} MiB" if n >= 2**20 else f"{n} bytes"


def check_source(file: str, max_bytes: int) -> None:
    """Refuse, in one line, a path that is missing, a folder, or a file larger than `max_bytes` (before reading it)."""
    fs, path = url_to_fs(file)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise VragError(f"{file}: file not found; pass the path of a benchmark annotation file") from None
    except OSError as err:
        raise VragError(f"{file}: cannot be read ({err.strerror or err}); check the path and its permissions") from None
    if info.get("type") == "directory":
        names = sorted(f.rsplit("/", 1)[-1] for f in fs.ls(path, detail=False) if f.endswith((".json", ".jsonl")))
        hint = f" (it holds {', '.join(names[:3])}{', ...' if len(names) > 3 else ''})" if names else ""
        raise VragError(f"{file}: is a folder{hint}; pass one .json or .jsonl annotation file")
    size = info.get("size")
    if info.get("type") == "file" and isinstance(size, int) and size > max_bytes:
        raise VragError(f"{file}: {_mib(size)} is larger than the import cap of {_mib(max_bytes)}; {FIX_CAP}")


class _Lines:
    """(line number, bytes) of a binary stream, or (line number, None) for a line longer than `cap` (its bytes are
    not kept). `cap` is None until the caller sets it, after the first non-blank line."""

    def __init__(self, f: IO[bytes], file: str, max_bytes: int) -> None:
        self.f, self.file, self.max_bytes = f, file, max_bytes
        self.cap: int | None = None

    def __iter__(self) -> Iterator[tuple[int, bytes | None]]:
        total, n, buf, over = 0, 1, bytearray(), False
        while chunk := self.f.read(CHUNK):
            if total == 0 and b"\x00" in chunk:
                raise VragError(f"{self.file}: holds NUL bytes, so it is not a UTF-8 text file (binary, UTF-16 or a "
                                "device); pass a .json or .jsonl annotation file saved as UTF-8")
            total += len(chunk)
            if total > self.max_bytes:
                raise VragError(f"{self.file}: more than the import cap of {_mib(self.max_bytes)} came from it "
                                f"(stopped at line {n}); {FIX_CAP}")
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if not over:
                    buf += chunk[start:] if end < 0 else chunk[start:end]
                    if self.cap is not None and len(buf) > self.cap:
                        over, buf = True, bytearray()
                if end < 0:
                    break
                yield n, None if over else bytes(buf)
                n, buf, over, start = n + 1, bytearray(), False, end + 1
        if buf or over:
            yield n, None if over else bytes(buf)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RowError(f"not UTF-8 text (byte 0x{raw[err.start]:02x} at column {err.start + 1}); "
                       "re-save the file as UTF-8") from None


def _loads(text: str) -> Any:
    """json.loads whose every failure is a RowError (a deep nest and a 5000-digit number raise other errors)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RowError(f"not valid JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise RowError("not usable JSON (nested too deeply)") from None
    except ValueError as err:  # an integer of more than 4300 digits
        raise RowError(f"not usable JSON ({str(err).split(';')[0]})") from None


def _document_rows(file: str, data: Any) -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        for key in WRAPPER_KEYS:
            if isinstance(data.get(key), list):
                return [(f"row {i}", r) for i, r in enumerate(data[key], 1)]
        return [("row 1", data)]
    if isinstance(data, list):
        return [(f"row {i}", r) for i, r in enumerate(data, 1)]
    raise VragError(f"{file}: expected a list of rows or an object with 'examples', got {type(data).__name__}")


def _line_row(n: int, raw: bytes | None, cap: int) -> tuple[str, Any]:
    try:
        if raw is None or len(raw) > cap:
            raise RowError(f"line is longer than the line cap of {_mib(cap)} (--max-line-bytes); not read")
        return f"line {n}", _loads(_decode(raw))
    except RowError as err:
        return f"line {n}", err


def read_numbered_rows(file: str, max_bytes: int, max_line_bytes: int) -> Iterator[tuple[str, Any]]:
    """(where, row) pairs: "line N" (the file's own line number) for JSON lines, "row N" for a JSON document.

    A UTF-8 byte-order mark is ignored. A JSON line that cannot be read is yielded as a RowError placeholder.
    A file none of whose lines is JSON stops with one line (nothing has been written by then)."""
    check_source(file, max_bytes)
    try:  # a local path is opened plainly: fsspec's local opener seeks, which a pipe cannot
        with (fsspec.open(file, "rb") if "://" in file else open(file, "rb")) as f:
            yield from _read(file, f, max_bytes, max_line_bytes)
    except IsADirectoryError:
        raise VragError(f"{file}: is a folder; pass one .json or .jsonl annotation file") from None
    except PermissionError as err:
        raise VragError(f"{file}: cannot be read ({err.strerror}); check its permissions") from None


def _read(file: str, f: IO[bytes], max_bytes: int, cap: int) -> Iterator[tuple[str, Any]]:
    """The rows of `f`: a JSON document (a list, or an object holding one) streamed row by row; JSON lines (or
    what is neither) line by line, from the bytes the document reader took and the rest of the stream."""
    text = Text(f, file, max_bytes)
    try:
        first = text.peek()
    except RowError:  # not UTF-8 at the start: the lines say where
        first = None
    if first in ("[", "{"):
        try:
            yield from stream_rows(text)
            return
        except ObjectStart as start:
            text.replay = bytearray(start.replay)
        except RowError as err:
            raise VragError(f"{file}: {err}; fix or re-export the file") from None
    yield from _rows(file, _Lines(_Replay(bytes(text.replay), f), file, max_bytes), cap)


class _Replay:
    """`head`, then the rest of `f`: a stream read again from its start without seeking (a pipe cannot)."""

    def __init__(self, head: bytes, f: IO[bytes]) -> None:
        self.head, self.f = head, f

    def read(self, n: int) -> bytes:
        if self.head:
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.f.read(n)


def _rows(file: str, lines: _Lines, cap: int) -> Iterator[tuple[str, Any]]:
    it = iter(lines)
    first: tuple[int, bytes] | None = None
    for n, raw in it:
        if n == 1 and raw is not None:
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # editors on Windows write one
        if raw is not None and raw.strip():
            first = (n, raw)
            break
    if first is None:
        raise VragError(f"{file}: is empty; pass a .json or .jsonl annotation file with rows")
    n1, raw1 = first
    head = raw1.lstrip()
    single: Any = None
    if not head.startswith(b"["):
        try:
            single = _loads(_decode(raw1))
        except RowError:
            single = RowError  # not a whole JSON value on its own line
    if head.startswith(b"[") or (single is RowError and head.startswith(b"{")):
        # one JSON document (a list, or an object over several lines): read it whole, within the byte cap
        parts = [raw1]
        for _, raw in it:
            parts.append(raw or b"")
        try:
            data = _loads(_decode(b"\n".join(parts)))
        except RowError as err:
            if head.startswith(b"["):
                raise VragError(f"{file}: {err}; fix or re-export the file") from None
            # `{` on line 1 but no document: JSON lines whose first line is bad
            for k, raw in enumerate(parts):
                if raw.strip():
                    yield _line_row(n1 + k, raw, len(raw1) if k == 0 else cap)
            return
        yield from _document_rows(file, data)
        return
    lines.cap = cap
    if single is RowError:
        yield _line_row(n1, raw1, len(raw1))
    good = single is not RowError
    held: tuple[str, Any] | None = None if single is RowError else (f"line {n1}", single)
    for n, raw in it:
        if raw is not None and not raw.strip():
            continue
        if held is not None:
            yield held
            held = None
        at, row = _line_row(n, raw, cap)
        good = good or not isinstance(row, RowError)
        yield at, row
    if held is not None:  # a one-line file: a single row, or a one-line document
        yield from _document_rows(file, held[1]) if isinstance(held[1], (dict, list)) else [held]
        return
    if not good:
        raise VragError(f"{file}: no line of it is JSON; pass a .json or .jsonl annotation file")
