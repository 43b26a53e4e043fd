"""The tag names of every action grammar (shared by the parser, the renderer and the sanitizer)."""

from __future__ import annotations

ALL_TAGS: tuple[str, ...] = ("think", "search", "select", "bbox", "region", "answer", "observe", "evidence", "read", "FINISH")
