"""`vrag-data report`: the workspace's data-quality report (report.duckdb + report.html) and a summary table."""

from __future__ import annotations

from pathlib import Path

import typer

from vrag_data.cli.common import console, fail, friendly_errors


def register(app: typer.Typer) -> None:
    @app.command("report")
    @friendly_errors
    def report_cmd(
        workspace: Path | None = typer.Option(None, "-w", "--workspace", help="Workspace folder"),
        run: str | None = typer.Option(None, "--run", help="Only this run (a folder under <workspace>/runs/); default: every run"),
        describe: bool = typer.Option(False, "--describe", help="Print every table and view with its description and exit"),
        viewer_limit: int = typer.Option(400, "--viewer-limit", min=0, help="Trajectories embedded in the HTML viewer (a stratified sample)"),
        no_html: bool = typer.Option(False, "--no-html", help="Only write report.duckdb"),
    ) -> None:
        """Build report.duckdb (tables + documented views) and report.html (charts, trajectory viewer)."""
        from vrag_data.report import build_report, describe as describe_views

        if describe:
            typer.echo(describe_views())
            return
        if workspace is None:
            fail("missing option -w/--workspace (the workspace folder to report on)")
        import duckdb

        from vrag_data.report.summary import print_summary
        from vrag_data.store import Workspace

        ws = Workspace(str(workspace))
        if not ws.fs.exists(ws.root):
            fail(f"{ws.root}: workspace not found; run `vrag-data ingest` first or check -w")
        res = build_report(ws, run, html=not no_html, viewer_limit=viewer_limit, progress=True)
        counts = ", ".join(f"{k}={v}" for k, v in res.counts.items() if k in ("pages", "tasks", "trajectories", "turns", "requests", "verdicts"))
        console.print(f"report: {res.db_path} ({counts}) in {res.seconds:.1f}s", highlight=False)
        if not no_html:
            console.print(f"html: {res.html_path}", highlight=False)
        local = res.db_path.removeprefix("file://") if ws.is_local else None
        if local:
            con = duckdb.connect(local, read_only=True)
            try:
                print_summary(con, "report" + (f" (run {run})" if run else ""), console, ws.root)
                from vrag_data.report.answers import answer_lines

                for line in answer_lines(con):  # a lenient or self-judging judge, at a glance
                    console.print(line, highlight=False, soft_wrap=True)
            finally:
                con.close()
