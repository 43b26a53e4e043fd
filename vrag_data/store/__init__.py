"""Workspace layout and durable, atomic record shards."""

from vrag_data.store.workspace import Workspace
from vrag_data.store.shards import read_records, write_records, read_table, records_to_table

__all__ = ["Workspace", "read_records", "write_records", "read_table", "records_to_table"]
