"""`vrag-data up | down | run | demo`: the Prefect layer (flows/) from the command line.

`up` starts a local Prefect server (127.0.0.1, port 4300 unless `--port`) and serves the deployments in the
background; `down` stops them; `run` runs the synth flow in this process; `demo [--port P]` = up -> `prefect deployment run
vrag-data/synth --watch` -> the output locations -> down. Prefect is imported inside the commands only (the library stays free of it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from vrag_data.cli.common import console, fail, friendly_errors, set_option
from vrag_data.offline import OFFLINE_ENV

OFFLINE = OFFLINE_ENV


def _workspace(config: Path | None, workspace: Path | None, sets: list[str] | None = None) -> Path:
    from vrag_data.config import load_config

    root = str(workspace) if workspace is not None else load_config(config, sets or ()).workspace
    if "://" in root:
        fail(f"{root}: the local Prefect server keeps its state in a local workspace folder; pass -w with a local path")
    return Path(root).expanduser().resolve()


def print_outputs(summary: dict[str, Any]) -> None:
    """The summary table, then where the products are, one line each."""
    from vrag_data.report.summary import summary_table

    rep = summary.get("report") or {}
    if rep.get("summary"):
        console.print(summary_table(rep["summary"], f"summary of {summary.get('workspace')}"))
    for e in (summary.get("exports") or {}).values():
        console.print(f"[bold]{e['recipe']}[/] (run {e['run_id']}):", highlight=False)
        d = Path(e["dir"])
        from vrag_data.export.formats import all_formats

        lines = [(f.label, d / f.entry) for f in all_formats() if (d / f.entry.split("/")[0]).is_dir()]
        for name, path in lines:
            console.print(f"  {name + ':':<15} {path}", highlight=False, soft_wrap=True)
    for line in summary.get("notes") or []:  # skipped inputs, why fewer were kept
        console.print(f"[yellow]note:[/] {line}", highlight=False, soft_wrap=True)
    if rep.get("db"):
        console.print(f"report.duckdb:   {rep['db']}", highlight=False, soft_wrap=True)
        console.print(f"report.html:     {rep['html']}", highlight=False, soft_wrap=True)


def _check(config: Path, workspace: Path | None = None, sets: list[str] | None = None) -> None:
    from vrag_data.config import load_config
    from vrag_data.config_check import check_run_config, set_origins, with_origins
    from vrag_data.errors import ConfigError

    cfg = load_config(config, sets or ())
    if workspace is not None:  # the workspace the run will use (it may already hold the tasks)
        cfg = cfg.model_copy(update={"workspace": str(workspace)})
    try:
        check_run_config(cfg, str(config))
    except ConfigError as err:  # a key a --set gave is named as such, not as the file's
        raise ConfigError(with_origins(str(err), set_origins(sets or ()))) from None


def up_hints() -> list[str]:
    """What `up` says besides the addresses: where the flow runs read API keys, and how to stop a run."""
    return [
        "API keys: the flow runs read the environment of this `up` (a variable exported later needs `vrag-data down` then "
        "`vrag-data up`), then a Prefect Secret block named after the variable (MY_KEY -> my-key)",
        "run: vrag-data submit vrag-data/synth --param config=run.yaml ... (checks the parameters first; Ctrl-C cancels "
        "the run it started); stop any run: prefect flow-run cancel <flow-run-id> (each run logs its id first)",
    ]


def _up(ws: Path, port: int | None = None) -> dict[str, Any]:
    from flows.local import up

    with console.status("starting the Prefect server and the deployments"):
        state = up(ws, port=port)
    again = " (already running)" if state.get("already_running") else ""
    console.print(f"Prefect UI: {state['ui_url']}{again}", highlight=False)
    console.print(f"API: {state['api_url']}  (export PREFECT_API_URL={state['api_url']})", highlight=False, soft_wrap=True)
    console.print(f"state and logs: {state['prefect_home']}", highlight=False, soft_wrap=True)
    for line in up_hints():
        console.print(line, highlight=False, soft_wrap=True)
    return state


def _report_server(ws: Path) -> Any:
    """Where `run` reports: the server `vrag-data up` started, else PREFECT_API_URL, else a temporary server with its
    database in the workspace, started here with a known address (returned, to be stopped): every process of the run
    (Ray workers included) reports to it, none starts a server of its own."""
    from flows.local import healthy, read_state

    state = read_state(ws)
    if state and healthy(state["api_url"]):
        os.environ["PREFECT_API_URL"] = state["api_url"]
        return None
    if os.environ.get("PREFECT_API_URL"):
        return None
    os.environ.setdefault("PREFECT_HOME", str(ws / ".prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    from prefect.server.api.server import SubprocessASGIServer

    temporary = SubprocessASGIServer()
    with console.status("starting a temporary Prefect server"):
        temporary.start(timeout=180)
    os.environ["PREFECT_API_URL"] = temporary.api_url
    return temporary


def _demo(config: Path, ws: Path, port: int | None, keep_up: bool) -> None:
    """`demo`: up, the deployment run watched, the outputs, down (unless `keep_up`); a run that did not complete exits
    with its code."""
    from flows.local import DEPLOYMENT, down

    state = _up(ws, port)
    code = 1
    try:
        from flows.submit import main_say, run_submit

        console.print(f"$ vrag-data submit {DEPLOYMENT} --param config=... --watch", highlight=False)
        for k, v in {**OFFLINE, "PREFECT_API_URL": state["api_url"], "PREFECT_HOME": state["prefect_home"]}.items():
            os.environ[k] = v
        code = run_submit(DEPLOYMENT, [f"config={config.resolve()}", f"workspace={ws}"], True, main_say)
        summary_path = ws / "pipeline.json"
        if summary_path.is_file():
            print_outputs(json.loads(summary_path.read_text()))
    finally:
        if not keep_up:
            stopped = down(ws)
            console.print(f"stopped {len(stopped)} process(es)", highlight=False)
    if code != 0:
        fail(f"the synth flow run did not complete (exit {code}); see the Prefect logs under {ws / '.prefect'}", code)


def register(app: typer.Typer) -> None:
    @app.command("up")
    @friendly_errors
    def up_cmd(
        config: Path | None = typer.Option(None, "--config", help="Run config; its workspace holds the server state."),
        workspace: Path | None = typer.Option(None, "-w", "--workspace", help="Workspace (default: the config's)."),
        port: int | None = typer.Option(None, "--port", min=1, max=65535,
                                        help="Port of the server on 127.0.0.1 (default 4300: the same API URL every time)."),
    ) -> None:
        """Start a local Prefect server (SQLite under <workspace>/.prefect, 127.0.0.1) and serve the deployments
        (`prefect deployment run vrag-data/synth ...`). Relative paths given to a deployment resolve against the
        folder this command runs in."""
        state = _up(_workspace(config, workspace), port)
        typer.echo(state["api_url"])

    @app.command("down")
    @friendly_errors
    def down_cmd(
        config: Path | None = typer.Option(None, "--config", help="Run config (its workspace)."),
        workspace: Path | None = typer.Option(None, "-w", "--workspace", help="Workspace given to `vrag-data up`."),
    ) -> None:
        """Stop the server and the deployments that `vrag-data up` started (by PID)."""
        from flows.local import down

        ws = _workspace(config, workspace)
        stopped = down(ws)
        console.print(f"stopped {len(stopped)} process(es)" + (f": {', '.join(map(str, stopped))}" if stopped else " (nothing was running)"),
                      highlight=False)

    @app.command("run")
    @friendly_errors
    def run_cmd(
        config: Path = typer.Option(..., "--config", help="Run config (YAML), e.g. configs/demo.yaml."),
        runner: str | None = typer.Option(None, "--runner", help="local | ray (default: the config's runner.kind)."),
        workspace: Path | None = typer.Option(None, "-w", "--workspace", help="Workspace (default: the config's)."),
        sets: list[str] | None = set_option(),
    ) -> None:
        """Run the synth flow (the whole pipeline) in this process; shards on threads or on Ray."""
        if runner is not None and runner not in ("local", "ray"):
            fail(f"--runner {runner!r}: use local or ray")
        ws = _workspace(config, workspace, sets)
        _check(config, ws, sets)  # the whole config, before any server starts or any folder is created
        for k, v in OFFLINE.items():
            os.environ.setdefault(k, v)
        temporary = _report_server(ws)
        try:
            from flows.flows import synth

            summary = synth(str(config.resolve()), workspace=str(ws), runner=runner, sets=sets or None)
        finally:
            if temporary is not None:
                from flows.tasks import flush_logs

                flush_logs()  # the last batch of log lines (the flow's final state) goes out before its server stops,
                temporary.stop()  # not to a closed port ("Error logging to API" after every run)
        print_outputs(summary)

    @app.command("demo")
    @friendly_errors
    def demo_cmd(
        config: Path = typer.Option(Path("configs/demo.yaml"), "--config", help="Run config of the demo."),
        workspace: Path | None = typer.Option(None, "-w", "--workspace", help="Workspace (default: the config's)."),
        keep_up: bool = typer.Option(False, "--keep-up", help="Leave the server running afterwards (stop it with `vrag-data down`)."),
        port: int | None = typer.Option(None, "--port", min=1, max=65535,
                                        help="Port of the Prefect server on 127.0.0.1 (default 4300; another one when it is in use)."),
    ) -> None:
        """up -> `prefect deployment run vrag-data/synth --param config=... --watch` -> where the outputs are -> down."""
        ws = _workspace(config, workspace)
        _check(config, ws)  # a bad config fails here, before any server starts
        _demo(config, ws, port, keep_up)

    register_submit(app)


def register_submit(app: typer.Typer) -> None:
    @app.command("submit")
    @friendly_errors
    def submit_cmd(
        deployment: str = typer.Argument("vrag-data/synth", help="The deployment (`vrag-data/synth`, `vrag-data/export`, ...)."),
        params: list[str] = typer.Option([], "--param", "-p", help="A parameter as key=value (a JSON value or text), "
                                         "as `prefect deployment run --param` takes it; repeat it."),
        watch: bool = typer.Option(True, "--watch/--no-watch", help="Follow the run until it ends (Ctrl-C cancels it; "
                                   "a second Ctrl-C leaves it running)."),
    ) -> None:
        """Check a deployment run's parameters here (the synth deployment's config, roles, inputs and endpoints: a bad
        config fails in seconds), then submit it to the server `vrag-data up` started (PREFECT_API_URL) and follow it.
        Relative paths among the parameters resolve against this folder."""
        from flows.submit import main_say, run_submit

        if not os.environ.get("PREFECT_API_URL"):
            fail("PREFECT_API_URL is not set: export the API address `vrag-data up` printed "
                 "(export PREFECT_API_URL=http://127.0.0.1:4300/api)")
        for k, v in OFFLINE.items():
            os.environ.setdefault(k, v)
        code = run_submit(deployment, params, watch, main_say)
        if code:
            raise typer.Exit(code)
