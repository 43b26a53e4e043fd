"""Data-quality report: workspace -> DuckDB tables and documented views -> static HTML with a trajectory viewer."""

from vrag_data.report.build import ReportResult, build_report, populate
from vrag_data.report.summary import print_run_summary, print_summary, summary_rows
from vrag_data.report.views import VIEWS, describe

__all__ = ["VIEWS", "ReportResult", "build_report", "describe", "populate", "print_run_summary", "print_summary", "summary_rows"]
