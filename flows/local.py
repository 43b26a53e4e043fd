"""`vrag-data up` / `down`: a local Prefect server and the served deployments, as two background processes.

State lives under `<workspace>/.prefect/`: PREFECT_HOME (the SQLite database `prefect.db`), the logs of both
processes and `up.json` (PIDs, API and UI addresses). The server binds 127.0.0.1 on a stable port (DEFAULT_PORT
unless `--port` says otherwise, so PREFECT_API_URL stays the same from one `up` to the next) with analytics off.
The deployments' process gets this environment (API keys included) as it is at `up` time, plus
UP_STARTED_ENV (when), so a key exported later is reported as such. `down` stops exactly the processes `up.json` names (and their process groups, i.e. the flow runs they started),
after checking each PID still runs the command `up` started (PIDs get reused).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from vrag_data.errors import VragError
from vrag_data.keys import UP_STARTED_ENV
from vrag_data.offline import OFFLINE_ENV
from vrag_data.process import pid_alive

STATE_FILE = "up.json"
DEPLOYMENT = "vrag-data/synth"  # flows.serve.SYNTH (not imported: that loads Prefect and every flow)
# one above Prefect's own 4200, so a `prefect server start` elsewhere does not collide with it
DEFAULT_PORT = 4300


def api_url_for(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port`. Connections a stopped server left in TIME-WAIT do not count: the probe
    binds as the server will (SO_REUSEADDR, as uvicorn does), so `down` then `up` on one port works at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def prefect_dir(ws_root: str | Path) -> Path:
    return Path(ws_root).expanduser().resolve() / ".prefect"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    env.update({
        "PREFECT_HOME": str(home),
        **OFFLINE_ENV,
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_LOCAL_STORAGE_PATH": str(home / "storage"),
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        # logs stream out to `prefect deployment run --watch` and the UI's live log view
        "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
        "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true",
    })
    return env


_alive = pid_alive


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def read_state(ws_root: str | Path) -> dict[str, Any] | None:
    path = prefect_dir(ws_root) / STATE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{api_url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def _wait(what: str, ok: Any, procs: list[tuple[subprocess.Popen[bytes], Path]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p, log in procs:
            if p.poll() is not None:
                raise VragError(f"{what}: process {p.pid} exited with code {p.returncode}; see {log}: {_tail(log)}")
        if ok():
            return
        time.sleep(0.5)
    raise VragError(f"{what}: not ready after {timeout:.0f}s; see the logs under {procs[0][1].parent}")


def _spawn(cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # own process group: `down` stops it with its flow runs


def up(ws_root: str | Path, port: int | None = None, timeout: float = 240.0, cwd: str | Path | None = None) -> dict[str, Any]:
    """Start the server and the deployments (or return the running ones). Returns the state written to up.json."""
    home = prefect_dir(ws_root)
    state = read_state(ws_root)
    if state and all(_alive(state[k]) for k in ("server_pid", "serve_pid")) and healthy(state["api_url"]):
        return {**state, "already_running": True}
    if state:
        down(ws_root)  # leftovers of a crashed `up`
    home.mkdir(parents=True, exist_ok=True)
    port = port or DEFAULT_PORT
    if not port_free(port):
        raise VragError(f"127.0.0.1:{port} is in use (another `vrag-data up`? `vrag-data down -w <its workspace>` stops "
                        "it); pass --port with a free port")
    api_url, ui_url = api_url_for(port), f"http://127.0.0.1:{port}"
    env = base_env(home)
    workdir = Path(cwd or os.getcwd()).resolve()
    server_log, serve_log = home / "server.log", home / "serve.log"
    # the UI asks /ui-settings where the API is: without these it says 4200 while the server runs on `port`
    server_env = {**env, "PREFECT_UI_API_URL": api_url, "PREFECT_SERVER_API_PORT": str(port), "PREFECT_UI_URL": ui_url}
    server = _spawn([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    server_env, server_log, workdir)
    started: list[tuple[subprocess.Popen[bytes], Path]] = [(server, server_log)]
    try:
        _wait("prefect server", lambda: healthy(api_url), started, timeout)
        # the flow runs' environment is this one, fixed now: a missing key's error says since when (`vrag_data.keys`)
        serve_env = {**env, "PREFECT_API_URL": api_url, UP_STARTED_ENV: time.strftime("%H:%M:%S UTC", time.gmtime())}
        serve = _spawn([sys.executable, "-m", "flows.serve"], serve_env, serve_log, workdir)
        started.append((serve, serve_log))
        _wait("deployments", lambda: _deployment_exists(api_url, DEPLOYMENT), started, timeout)
    except BaseException:
        for p, _ in started:
            _stop_group(p.pid)
        raise
    state = {"api_url": api_url, "ui_url": ui_url, "port": port, "server_pid": server.pid, "serve_pid": serve.pid, "prefect_home": str(home),
             "cwd": str(workdir), "logs": {"server": str(server_log), "serve": str(serve_log)}, "started_at": time.time()}
    tmp = home / f".tmp-{os.getpid()}-{STATE_FILE}"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, home / STATE_FILE)
    return state


def _deployment_exists(api_url: str, name: str) -> bool:
    try:
        return httpx.get(f"{api_url}/deployments/name/{name}", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _stop_group(pid: int, grace: float = 20.0) -> bool:
    """SIGTERM the process group led by `pid`, then SIGKILL what is left. True when the leader is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.2)
    return not _alive(pid)


MARKERS = {"server_pid": "prefect", "serve_pid": "flows.serve"}


def down(ws_root: str | Path) -> list[int]:
    """Stop what `up` started for this workspace. Returns the PIDs stopped."""
    state = read_state(ws_root)
    if state is None:
        return []
    stopped = []
    for key in ("serve_pid", "server_pid"):  # the deployments first, so no new flow run starts
        pid = int(state.get(key) or 0)
        if pid and _alive(pid) and MARKERS[key] in _cmdline(pid):
            if _stop_group(pid):
                stopped.append(pid)
    (prefect_dir(ws_root) / STATE_FILE).unlink(missing_ok=True)
    return stopped
