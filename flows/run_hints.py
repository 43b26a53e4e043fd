"""What a flow run tells its watcher first: how to stop it. Ctrl-C on `prefect deployment run ... --watch` stops only
the watcher; the flow run goes on until Prefect is asked to cancel it."""

from __future__ import annotations

from prefect import get_run_logger
from prefect.runtime import flow_run


def cancel_command(flow_run_id: str) -> str:
    return f"prefect flow-run cancel {flow_run_id}"


def log_cancel_hint() -> str | None:
    """Log "to stop this run: prefect flow-run cancel <id>" in a top-level flow run (a subflow is cancelled with its
    parent); returns the line logged, None when there is none to log."""
    run_id = flow_run.id
    if not run_id or flow_run.parent_flow_run_id:
        return None
    line = (f"to stop this run: {cancel_command(run_id)} (Ctrl-C on `vrag-data submit` cancels the run it started; on "
            "`prefect deployment run --watch` it stops only the watcher)")
    get_run_logger().info(line)
    return line
