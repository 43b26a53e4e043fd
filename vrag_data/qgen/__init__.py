"""Question synthesis from ingested pages: evidence regions -> question writer (a VLM, or the offline
oracle) -> checks and verification -> Task records with evidence pages and boxes (`tasks generate`)."""

from vrag_data.qgen.generate import generate_tasks
from vrag_data.qgen.run_records import GenerateSummary, Rejection, load_rejections

__all__ = ["GenerateSummary", "Rejection", "generate_tasks", "load_rejections"]
