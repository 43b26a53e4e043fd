"""Ctrl-C on `vrag-data submit --watch` as a user presses it: the first cancels the flow run it started (Prefect's
cancel, its subflows too) and says so once it has ended; a second stops waiting, leaves the run to Prefect and says
how to cancel it. The
teacher holds every request until the test ends, so the runs are busy in their episodes whenever the keys are
pressed (counted: the endpoint holds a request; never timed)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.support.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
HANG_S = 600  # guards against a hang on a loaded machine; no test checks a duration


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: str, ok) -> None:  # noqa: ANN001
    deadline = time.monotonic() + HANG_S
    while not ok():
        assert time.monotonic() < deadline, f"waited in vain for {what}"
        time.sleep(0.2)


def _state(api: str, run_id: str) -> str:
    import httpx

    return httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json()["state"]["type"]


def _children(api: str, run_id: str) -> list[str]:
    import httpx

    body = {"flow_runs": {"parent_flow_run_id": {"any_": [run_id]}}}
    return [r["state"]["type"] for r in httpx.post(f"{api}/flow_runs/filter", json=body, timeout=30).json()]


def _submit(cfg: Path, api: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([str(BIN / "vrag-data"), "submit", "vrag-data/synth", "--param", f"config={cfg}"], cwd=REPO,
                            env={**CLEAN_ENV, "PREFECT_API_URL": api}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    return proc, lines


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
def test_ctrl_c_cancels_the_run_it_started_and_a_second_leaves_it_running(tmp_path):
    gate = threading.Event()
    with OpenAIServer(reply="<search>revenue</search>", models=[MODEL], hold=gate) as srv:
        ws = tmp_path / "ws"
        cfg = tmp_path / "run.yaml"
        cfg.write_text(yaml.safe_dump({
            "workspace": str(ws), "ingest": {"sample_corpus": 1, "ocr": "off", "workers": 1},
            "synth": {"recipes": ["visor"]}, "runner": {"max_concurrency": 2, "retries": 0},
            "roles": {"policy": {"endpoints": [{"base_url": srv.base_url, "model": MODEL}]}, "judge": {"kind": "rules"}},
        }))
        vrag = str(BIN / "vrag-data")
        up = subprocess.run([vrag, "up", "--config", str(cfg), "--port", str(_free_port())], cwd=REPO, env=CLEAN_ENV,
                            capture_output=True, text=True, timeout=HANG_S)
        try:
            assert up.returncode == 0, up.stderr
            api = up.stdout.strip()

            # one Ctrl-C: the run is cancelled, its subflows with it, and the command says so
            proc, lines = _submit(cfg, api)
            _until("the run's first teacher request", lambda: srv.in_flight > 0 or proc.poll() is not None)
            assert proc.poll() is None, lines
            run_id = re.search(r"submitted flow run \S+ \(([0-9a-f-]{36})\)", "\n".join(lines)).group(1)
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=HANG_S)
            text = "\n".join(lines)
            assert rc != 0 and f"Ctrl-C: cancelling flow run {run_id}" in text, text[-3000:]
            assert f"cancelled flow run {run_id} and its subflows" in text, text[-3000:]
            assert _state(api, run_id) == "CANCELLED"
            assert all(s in ("CANCELLED", "CANCELLING", "COMPLETED") for s in _children(api, run_id))

            # two Ctrl-C: the command stops waiting and says how to stop the run, which is still running. The
            # deployments' process is paused meanwhile, so the cancel cannot take effect before the second key
            import json

            serve_pid = json.loads((ws / ".prefect" / "up.json").read_text())["serve_pid"]
            held = srv.in_flight
            proc, lines = _submit(cfg, api)
            _until("the second run's first teacher request", lambda: srv.in_flight > held or proc.poll() is not None)
            run_id = re.search(r"submitted flow run \S+ \(([0-9a-f-]{36})\)", "\n".join(lines)).group(1)
            os.kill(serve_pid, signal.SIGSTOP)
            try:
                proc.send_signal(signal.SIGINT)
                _until("the cancel line", lambda: any("Ctrl-C: cancelling" in x for x in lines) or proc.poll() is not None)
                proc.send_signal(signal.SIGINT)
                rc = proc.wait(timeout=HANG_S)
                assert _state(api, run_id) in ("CANCELLING", "RUNNING")  # not ended: the command left it to Prefect
            finally:
                os.kill(serve_pid, signal.SIGCONT)
            text = "\n".join(lines)
            assert rc == 0 and f"left running: stopped following flow run {run_id}" in text, text[-3000:]
            assert f"to stop it yourself: prefect flow-run cancel {run_id}" in text, text[-3000:]
        finally:
            gate.set()
            subprocess.run([vrag, "down", "--config", str(cfg)], cwd=REPO, env=CLEAN_ENV, capture_output=True, timeout=120)
