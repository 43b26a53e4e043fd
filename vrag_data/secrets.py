"""Every secret the process knows (API keys read from the environment), and `redact` for any text that is about
to be stored or printed: a server that echoes the key back in an error body cannot put it on disk."""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_SECRETS: set[str] = set()
MARK = "<redacted>"


def register_secret(value: str | None) -> None:
    """Remember `value` (short values are ignored: they would redact ordinary words)."""
    if value and len(value) >= 8:
        with _LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by a mark."""
    if not text or not _SECRETS:
        return text
    for s in sorted(_SECRETS, key=len, reverse=True):
        if s in text:
            text = text.replace(s, MARK)
    return text
