"""The tag names of every action grammar (shared by the parser, the renderer and the neutraliser)."""

from __future__ import annotations

from vrag_data.inert import ALL_TAGS

__all__ = ["ALL_TAGS"]
