"""API keys are resolved where the flow runs (issue 40, item 1), and a flow run says first how to stop it (item 5).

Order: the environment of the process where the stage runs, then a Prefect Secret block named after the variable
(MY_KEY -> my-key). A key found nowhere stops with one line naming every place looked; a found key is redacted.
"""

from __future__ import annotations

import time

import pytest
import yaml

from vrag_data.config import load_config
from vrag_data.config_check import check_run_config
from vrag_data.errors import ConfigError
from vrag_data.keys import UP_STARTED_ENV, KeyNotFound, KeySource, add_key_source, remove_key_source, resolve_key
from vrag_data.secrets import MARK, redact

VAR = "VRAG_TEST_WHERE_KEY"


def _config(tmp_path, var: str):
    """A run config that passes every check but the key: vrag_rl on an empty folder and a one-line QA file, the
    policy served at an endpoint whose key variable is `var`."""
    qa, docs = tmp_path / "qa.jsonl", tmp_path / "docs"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    docs.mkdir(exist_ok=True)
    policy = {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": var}]}
    path = tmp_path / f"{var.lower()}.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "ingest": {"paths": [str(docs)]}, "tasks": {"file": str(qa)},
                                    "synth": {"recipes": ["vrag_rl"]},
                                    "roles": {"policy": policy, "judge": {"kind": "rules"}, "grounding": {"same_as": "policy"}}}))
    return path


@pytest.fixture
def vault(monkeypatch):
    """A key source backed by a dict (what a Secret block store is to the library), removed afterwards."""
    store: dict[str, str] = {}
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delenv(UP_STARTED_ENV, raising=False)
    add_key_source(KeySource("test-vault", store.get, lambda var: f"not in the test vault under {var.lower()}"))
    yield store
    remove_key_source("test-vault")


def test_environment_wins_then_the_source_and_a_found_key_is_redacted(vault, monkeypatch):
    vault[VAR] = "vault-key-0123456789"
    monkeypatch.setenv(VAR, "shell-key-0123456789")
    assert resolve_key(VAR, "roles.policy.endpoints[0].api_key_env") == "shell-key-0123456789"
    monkeypatch.delenv(VAR)
    assert resolve_key(VAR, "roles.policy.endpoints[0].api_key_env") == "vault-key-0123456789"
    import os
    assert os.environ[VAR] == "vault-key-0123456789"  # what the stages and their workers read next
    assert redact("server said: bad key vault-key-0123456789") == f"server said: bad key {MARK}"


def test_a_missing_key_names_every_place_looked_in_one_line(vault, monkeypatch, tmp_path):
    monkeypatch.setenv(UP_STARTED_ENV, "12:01:33 UTC")  # as in the process `vrag-data up` started
    cfg = _config(tmp_path, VAR)
    with pytest.raises(ConfigError) as err:
        check_run_config(load_config(str(cfg)), str(cfg))
    line = str(err.value)
    assert "\n" not in line
    # every place looked, in order: the up server's environment first, the test's own source last (a flow that ran
    # earlier in this process may have added Prefect's Secret blocks between them)
    assert line.startswith(f"{cfg}: roles.policy.endpoints[0].api_key_env: the variable {VAR} is not set where this runs: "
                           "not in the environment of the `vrag-data up` server (started 12:01:33 UTC; a variable exported "
                           "after `up` does not reach it: `vrag-data down` then `vrag-data up` in a shell that has it); "), line
    assert line.endswith("not in the test vault under vrag_test_where_key"), line
    with pytest.raises(KeyNotFound):
        resolve_key(VAR, "x")


@pytest.mark.heavy
@pytest.mark.slow  # a temporary Prefect server
def test_a_flow_finds_a_secret_block_the_process_lacks_and_logs_how_to_stop_it(tmp_path, monkeypatch):
    from prefect import flow
    from prefect.blocks.system import Secret
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.testing.utilities import prefect_test_harness

    from flows.flows import _reason_logged, load
    from flows.secret_keys import SOURCE

    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delenv("VRAG_TEST_WHERE_MISSING", raising=False)
    cfg, missing = _config(tmp_path, VAR), _config(tmp_path, "VRAG_TEST_WHERE_MISSING")

    @flow(name="keys-where-flow-runs")
    def run(config: str) -> str:
        with _reason_logged():
            load(config)
            import os
            return os.environ[VAR]

    try:
        with prefect_test_harness(server_startup_timeout=300):
            Secret(value="block-key-0123456789").save("vrag-test-where-key", overwrite=True)
            state = run(str(cfg), return_state=True)
            assert state.is_completed() and state.result() == "block-key-0123456789"
            assert redact("echo block-key-0123456789") == f"echo {MARK}"
            run_id = state.state_details.flow_run_id
            lines: list[str] = []
            for _ in range(60):  # the run's logs reach the server in batches: wait for them
                with get_client(sync_client=True) as client:
                    logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
                lines = [lg.message for lg in sorted(logs, key=lambda lg: lg.timestamp)]
                if any(x.startswith("to stop this run:") for x in lines):
                    break
                time.sleep(1)
            assert lines[0].startswith("Beginning flow run")  # Prefect's own, then the flow's first line
            assert lines[1] == (f"to stop this run: prefect flow-run cancel {run_id} (Ctrl-C on `vrag-data submit` cancels "
                                "the run it started; on `prefect deployment run --watch` it stops only the watcher)")

            bad = run(str(missing), return_state=True)
            assert bad.is_failed()
            with pytest.raises(ConfigError) as err:
                bad.result()
            line = str(err.value)
            assert "\n" not in line and "the variable VRAG_TEST_WHERE_MISSING is not set where this runs" in line
            assert "not in the environment of this process" in line
            assert "no Prefect Secret block 'vrag-test-where-missing' (create it: PREFECT_API_URL=http://127.0.0.1:" in line
            assert ".save('vrag-test-where-missing', overwrite=True)" in line
    finally:
        remove_key_source(SOURCE)
