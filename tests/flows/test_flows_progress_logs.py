"""A progress line reaches the Prefect task run's logs exactly once (the library's stderr copy is not printed through
`log_prints`, and the progress logger does not propagate to a second handler), filed under the flow run the user
started: the deployed flows run their shards in an inner flow (it picks the task runner), and `prefect deployment run
--watch` follows only the outer run's logs."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")

from prefect import flow, task  # noqa: E402
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

import flows.tasks  # noqa: E402,F401 - installs the progress -> task-log handler, as every flow run does


@task(name="progress-task")
def _stage() -> None:
    from vrag_data.progress import lines_only, stage_progress

    with lines_only(), stage_progress("toy stage", 3, every=0.0) as step:
        for _ in range(3):
            step()


@flow(name="progress-shards")  # the inner flow, as flows.flows.synth_shards
def _inner() -> None:
    _stage()


@flow(name="progress-flow", log_prints=True)  # as the deployed flows are
def _flow() -> str:
    from prefect.runtime import flow_run

    _inner()
    return flow_run.id


@pytest.mark.slow
def test_each_progress_line_is_logged_once_in_the_task_run():
    from prefect.client.orchestration import get_client
    from prefect.logging.handlers import APILogHandler

    with prefect_test_harness(server_startup_timeout=300):
        outer = _flow()
        APILogHandler().flush()  # the log batches are sent in the background
        with get_client(sync_client=True) as client:
            found = [x for x in client.read_logs() if x.message.startswith("toy stage: ")]
    logs = [x.message for x in found]
    assert logs, "no progress line reached the task run's logs"
    assert len(logs) == len(set(logs)) == 4, logs  # 1/3, 2/3, 3/3 and the "done" line: each once
    assert {str(x.flow_run_id) for x in found} == {str(outer)}  # what --watch on the started run shows
    assert all(x.task_run_id is not None for x in found)  # and still the task run's own lines
