"""Pydantic records: the contract between stages, exports and the trainer."""

from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import *  # noqa: F401,F403
from vrag_data.schema.records import ALL_MODELS

__all__ = ["Box", "ALL_MODELS"]
