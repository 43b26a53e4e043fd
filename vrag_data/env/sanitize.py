"""The environment's name for the neutraliser of outside text (`vrag_data.inert`)."""

from __future__ import annotations

from vrag_data.inert import has_action_markup, live_action_tags, live_chat_markup, sanitize_text

__all__ = ["has_action_markup", "live_action_tags", "live_chat_markup", "sanitize_text"]
