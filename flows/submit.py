"""`vrag-data submit`: a deployment run from the command line, checked before it is submitted and stopped with it.

The synth deployment's parameters are checked here first (the config, the roles, the inputs, every endpoint's
models: what the flow checks when it starts), so a bad config fails in seconds, not after Prefect has started a flow
run. API keys are the exception: a flow run reads them in the environment of the `vrag-data up` process (or a Prefect
Secret block), which this process cannot see; a role whose key is not found here is checked by the flow run. Relative
paths among the parameters are made absolute against the folder this command runs in (the flow runs where `up` was
started). With `--watch` the run's states and log lines are printed until it ends; Ctrl-C cancels the flow run
(Prefect's cancel, its subflows too), waits until it has ended and says so; a second Ctrl-C stops waiting (the run
is left to Prefect, still running until the cancel takes effect) and prints how to cancel it."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from flows.run_hints import cancel_command
from vrag_data.errors import VragError

PATH_PARAMS = ("config", "input", "workspace")  # parameters of the synth flow that name files or folders
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "CRASHED")


def parse_params(items: list[str]) -> dict[str, Any]:
    """`key=value` items as `prefect deployment run --param` reads them: the value as JSON when it parses, else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise VragError(f"--param {item!r}: write key=value, e.g. --param config=run.yaml")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def absolute_paths(params: dict[str, Any], here: Path) -> dict[str, Any]:
    """The path parameters made absolute against `here` (the flow run works in another folder)."""
    out = dict(params)
    for key in PATH_PARAMS:
        v = out.get(key)
        if isinstance(v, str) and v and "://" not in v and not Path(v).expanduser().is_absolute():
            out[key] = str((here / Path(v).expanduser()).resolve())
    return out


def precheck_synth(params: dict[str, Any]) -> list[str]:
    """What the synth flow checks first, here: raises one line on a problem; returns the roles left to the flow run
    (their API key is not found here: the flow run looks in the `up` process's environment)."""
    from flows.flows import _merge, _origins, _overrides, check_endpoints
    from flows.secret_keys import use_secret_blocks
    from vrag_data.config import RoleParameter, load_config, parse_config
    from vrag_data.config_check import check_run_config, set_origins, with_origins
    from vrag_data.errors import ConfigError
    from vrag_data.keys import KeyNotFound, resolve_key

    known = {"config", "input", "recipe", "workspace", "endpoints", "samples", "questions", "runner", "sets"}
    bad = sorted(set(params) - known)
    if bad:
        raise VragError(f"--param {bad[0]}: not a parameter of the synth deployment; it takes {', '.join(sorted(known))}")
    try:
        eps = {r: RoleParameter.model_validate(v) for r, v in (params.get("endpoints") or {}).items()}
    except (ValueError, AttributeError) as err:
        raise VragError(f"--param endpoints: {' '.join(str(err).split())[:300]}") from None
    args = (params.get("input"), params.get("recipe"), eps, params.get("samples"), params.get("questions"))
    origins = {**_origins(*args), **set_origins(params.get("sets") or (), "--param sets")}
    config, sets = params.get("config"), list(params.get("sets") or ())
    use_secret_blocks()
    try:
        cfg = load_config(config, sets)
        over = _overrides(*args)
        if params.get("workspace"):
            over["workspace"] = params["workspace"]
        if over:
            cfg = parse_config(_merge(cfg.model_dump(mode="json", exclude_unset=True), over), f"{config or '<defaults>'} + parameters")
        deferred = []
        for role, rc in cfg.roles.items():
            for ep in rc.endpoints:
                if ep.api_key_env:
                    try:
                        resolve_key(ep.api_key_env, f"roles.{role}")
                    except KeyNotFound:
                        deferred.append(role)
        roles = {r: (rc.model_copy(update={"endpoints": [e.model_copy(update={"api_key_env": None}) for e in rc.endpoints]})
                     if r in deferred else rc) for r, rc in cfg.roles.items()}
        check_run_config(cfg.model_copy(update={"roles": roles}), config or "<defaults>")
        check_endpoints(cfg.model_copy(update={"roles": {r: rc for r, rc in cfg.roles.items() if r not in deferred}}))
    except (VragError, ConfigError) as err:
        raise VragError(with_origins(str(err), origins)) from None
    return sorted(set(deferred))


def submit(deployment: str, params: dict[str, Any]) -> Any:
    """A flow run of `deployment` with `params`, submitted now (not waited for)."""
    from prefect.deployments import run_deployment

    return run_deployment(deployment, parameters=params, timeout=0, as_subflow=False)


def cancel(flow_run_id: UUID) -> list[str]:
    """Prefect's cancel (state Cancelling) for the flow run and each of its subflow runs not yet final; their ids."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.client.schemas.objects import StateType
    from prefect.states import State

    done: list[str] = []
    with get_client(sync_client=True) as client:
        runs = [client.read_flow_run(flow_run_id)]
        runs += client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))
        for run in runs:
            if run.state is not None and run.state.type.value in FINAL:
                continue
            client.set_flow_run_state(run.id, State(type=StateType.CANCELLING), force=True)
            done.append(str(run.id))
    return done


@contextmanager
def interrupts() -> Iterator[Callable[[], int]]:
    """SIGINT counted instead of raised while the block runs: `count()` says how many arrived."""
    seen = [0]

    def on_int(signum: int, frame: object) -> None:
        seen[0] += 1

    before = signal.signal(signal.SIGINT, on_int)
    try:
        yield lambda: seen[0]
    finally:
        signal.signal(signal.SIGINT, before)


def watch(flow_run_id: UUID, say: Callable[[str], None], interval: float = 2.0) -> str:
    """Print the run's state changes and log lines until it ends; Ctrl-C once cancels it (and its subflows) and
    waits for it to end, twice leaves it running. Returns the final state's type, or "LEFT" (left running)."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    seen_logs: set[str] = set()
    last = ""
    cancelled = False
    with interrupts() as count, get_client(sync_client=True) as client:
        while True:
            if count() >= 2:
                now = client.read_flow_run(flow_run_id).state
                say(f"left running: stopped following flow run {flow_run_id} ({now.name if now else 'Pending'}: the cancel "
                    f"asked for goes on without this command); to stop it yourself: {cancel_command(str(flow_run_id))}")
                return "LEFT"
            if count() == 1 and not cancelled:
                ids = cancel(flow_run_id)
                cancelled = True
                say(f"Ctrl-C: cancelling flow run {flow_run_id} ({len(ids)} run(s) with its subflows); "
                    "Ctrl-C again to stop waiting and leave it to Prefect")
            run = client.read_flow_run(flow_run_id)
            for log in client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))):
                if str(log.id) not in seen_logs:
                    seen_logs.add(str(log.id))
                    say(log.message)
            state = run.state.type.value if run.state is not None else "PENDING"
            name = run.state.name if run.state is not None else "Pending"
            if name != last:
                say(f"flow run {run.name} ({flow_run_id}): {name}")
                last = name
            if state in FINAL:
                if cancelled and state == "CANCELLED":
                    say(f"cancelled flow run {flow_run_id} and its subflows")
                return state
            for _ in range(int(interval / 0.1)):  # short sleeps: a Ctrl-C is acted on at once
                if count() != (1 if cancelled else 0):
                    break
                time.sleep(0.1)


def run_submit(deployment: str, items: list[str], do_watch: bool, say: Callable[[str], None]) -> int:
    """The command: check, submit, watch. Returns the exit code (0: completed or submitted without --watch)."""
    params = absolute_paths(parse_params(items), Path.cwd())
    if deployment.endswith("/synth"):
        deferred = precheck_synth(params)
        for role in deferred:
            say(f"roles.{role}: its API key is not in this shell; the flow run looks for it where it runs "
                "(the `vrag-data up` environment, then a Prefect Secret block)")
    run = submit(deployment, params)
    say(f"submitted flow run {run.name} ({run.id}); to stop it: {cancel_command(str(run.id))}")
    if not do_watch:
        return 0
    final = watch(run.id, say)
    return 0 if final in ("COMPLETED", "LEFT") else 1


def main_say(line: str) -> None:
    print(line, file=sys.stderr if line.startswith(("Ctrl-C", "left running")) else sys.stdout, flush=True)
