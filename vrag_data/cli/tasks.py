"""`vrag-data tasks ...`: task import, generation and the report of generated tasks.

The group lives at module level (`tasks_app`) so other stages add commands with `@tasks_app.command(...)`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from vrag_data.cli.common import console, fail, friendly_errors, set_option
from vrag_data.progress import stage_progress
from vrag_data.tasks.formats import FORMATS, MAX_BYTES, MAX_LINE_BYTES

if TYPE_CHECKING:  # the CLI imports a stage's modules when the command runs
    from vrag_data.qgen.tally import Tally

tasks_app = typer.Typer(help="Tasks (questions with gold answers and evidence) in the workspace.",
                        no_args_is_help=True)

MAX_SHOWN_ERRORS = 20


@tasks_app.command("import")
@friendly_errors
def import_cmd(
    file: str = typer.Argument(..., help="Annotation file (.json or .jsonl) of a benchmark"),
    workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace with ingested documents"),
    fmt: str = typer.Option("corpus", "--format", help=f"One of: {', '.join(FORMATS)}"),
    split: str = typer.Option("train", "--split", help="Split label stored on every task"),
    benchmark: str = typer.Option(None, "--benchmark", help="Override the benchmark name stored on the tasks"),
    max_bytes: int = typer.Option(MAX_BYTES, "--max-bytes", min=1,
                                  help="Refuse a larger file before reading it (a pipe stops there)"),
    max_line_bytes: int = typer.Option(MAX_LINE_BYTES, "--max-line-bytes", min=1,
                                       help="A longer JSON line (after the first) is a skipped row"),
) -> None:
    """Map a benchmark's QA rows to Task records (tasks/<file-stem>-<hash>.parquet, one shard per file, so imports
    from several files add up); bad rows are reported one line each and skipped; re-importing a file adds nothing."""
    from vrag_data.store import Workspace
    from vrag_data.tasks import import_tasks
    from vrag_data.tasks.importers import one_line
    from vrag_data.tasks.store import count_tasks

    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; use one of: {', '.join(FORMATS)}", 2)
    ws = Workspace(str(workspace))
    summary = import_tasks(file, ws, fmt, split=split, benchmark=benchmark, max_bytes=max_bytes,
                           max_line_bytes=max_line_bytes)
    for line in summary.errors[:MAX_SHOWN_ERRORS]:
        console.print(f"[yellow]skipped[/] {escape(line)}", highlight=False, soft_wrap=True)
    if len(summary.errors) > MAX_SHOWN_ERRORS:
        console.print(f"... and {len(summary.errors) - MAX_SHOWN_ERRORS} more (tasks/import_errors.parquet)",
                      highlight=False)
    if summary.replaced_shard:
        console.print(f"replaced {escape(summary.replaced_shard)}, the shard an earlier version wrote for this file "
                      "(every one of its tasks is in the new shard)", highlight=False, soft_wrap=True)
    hops = ", ".join(f"{k} {v}" for k, v in summary.by_hop.items()) or "none"
    dropped = f", {summary.dropped} no longer in the file" if summary.dropped else ""
    name = escape(one_line(Path(file).name, 120))
    console.print(f"{name}: imported {summary.imported} of {summary.rows} rows into {escape(summary.shard)} ({hops}): "
                  f"{summary.added} new{dropped}; skipped {summary.skipped}, duplicates {summary.duplicates}; "
                  f"the workspace holds {count_tasks(ws)} tasks", highlight=False, soft_wrap=True)


def _csv(value: str | None, name: str, allowed: tuple[str, ...]) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        fail(f"--{name} {value!r}: use a comma-separated subset of {','.join(allowed)}", 2)
    return items


@tasks_app.command("generate")
@friendly_errors
def generate_cmd(
    workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace with ingested (and layout-parsed) pages"),
    config: Path = typer.Option(None, "--config", help="Run config YAML (tasks.generate, roles)"),
    n: int = typer.Option(None, "--n", help="Tasks to keep (default: tasks.generate.n)"),
    kinds: str = typer.Option(None, "--kinds", help="single,multi_page,cross_doc"),
    types: str = typer.Option(None, "--types", help="extraction,logic"),
    sources: str = typer.Option(None, "--sources", help="text,table,chart,figure,layout"),
    writer: str = typer.Option(None, "--writer", help="oracle (offline templates); default oracle unless a writer "
                                                      "model is given by --writer-url or roles.question_writer"),
    writer_url: str = typer.Option(None, "--writer-url", help="OpenAI-compatible base URL of the question writer"),
    writer_model: str = typer.Option(None, "--writer-model", help="Model name served at --writer-url"),
    min_share: float = typer.Option(None, "--min-share", min=0.0, max=1.0,
                                    help="Exit 3 when fewer than this share of --n is kept (default: tasks.generate.min_share, 0.8)"),
    sets: list[str] = set_option(),
) -> None:
    """Write verified questions with evidence pages and boxes from the ingested pages (tasks/generated.parquet)."""
    from vrag_data.config import EndpointConfig, RoleConfig, check_bound, load_config
    from vrag_data.qgen import generate_tasks
    from vrag_data.store import Workspace

    check_bound("tasks.generate.n", n, "--n")
    cfg = load_config(config, sets or ())
    if writer not in (None, "oracle"):
        fail(f"--writer {writer!r}: the only named writer is 'oracle'; for a model pass --writer-url and --writer-model")
    if writer == "oracle" and (writer_url or writer_model):
        fail("--writer oracle cannot be combined with --writer-url/--writer-model; pick one")
    if bool(writer_url) != bool(writer_model):
        fail("--writer-url and --writer-model go together; pass both")
    if writer_url:
        base = cfg.roles.get("question_writer", RoleConfig())
        cfg.roles["question_writer"] = base.model_copy(update={
            "kind": "openai", "endpoints": [EndpointConfig(base_url=writer_url, model=writer_model)]})
    use_model = writer != "oracle" and "question_writer" in cfg.roles and cfg.roles["question_writer"].kind == "openai"
    target = n or cfg.tasks.generate.n
    floor = min_share if min_share is not None else cfg.tasks.generate.min_share
    with stage_progress("tasks generate (kept)", target) as step:
        summary = generate_tasks(
            Workspace(str(workspace)), cfg, n=n, kinds=_csv(kinds, "kinds", ("single", "multi_page", "cross_doc")),
            types=_csv(types, "types", ("extraction", "logic")),
            sources=_csv(sources, "sources", ("text", "table", "chart", "figure", "layout")),
            writer="model" if use_model else "oracle",
            progress=lambda kept, att: step(completed=kept, info=f"{att} attempts"))
    fmt = lambda d: ", ".join(f"{k} {v}" for k, v in d.items()) or "none"  # noqa: E731
    got = summary.kept + summary.already
    console.print(f"kept {got} of {target} asked ({summary.kept} new, {summary.already} already stored) from "
                  f"{summary.attempted} attempts ({summary.yield_rate:.0%}); {summary.stored} tasks in {summary.shard}; "
                  f"writer {summary.writer}, verification {summary.verify_mode}", highlight=False, soft_wrap=True)
    console.print(f"kinds: {fmt(summary.by_kind)}; types: {fmt(summary.by_type)}; sources: {fmt(summary.by_source)}",
                  highlight=False, soft_wrap=True)
    rejected = dict(sorted(summary.rejected.items(), key=lambda kv: -kv[1]))
    console.print(f"rejected: {fmt(rejected)} ({summary.rejections_file}); teacher calls {summary.calls}, "
                  f"requests {summary.requests}", highlight=False, soft_wrap=True)
    for note in summary.notices:
        console.print(f"[yellow]notice:[/] {escape(note)}", highlight=False, soft_wrap=True)
    _print_tally(summary.tally)
    short_kinds = summary.tally.short_kinds(target, floor)
    if summary.shortfall:
        top = ", ".join(f"{k} {v}" for k, v in list(rejected.items())[:3]) or "no attempts left"
        line = (f"short of --n {target} by {summary.shortfall} after {summary.attempted} attempts (largest causes: {top}); "
                "raise tasks.generate.max_attempts, widen --kinds/--sources, ingest more documents or use a model writer")
        if got < floor * target:
            fail(f"tasks generate: {line}; below the floor of {floor:.0%} of --n (--min-share)"
                 + (f"; kinds under their share: {'; '.join(short_kinds)}" if short_kinds else ""), code=3)
        console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    if short_kinds and kinds is None:  # default kinds are best-effort: one the corpus cannot give is said, not fatal
        console.print(f"[yellow]notice:[/] default kinds this corpus gave under {floor:.0%} of their share of --n "
                      f"{target}: {escape('; '.join(short_kinds))}; the other kinds filled --n (ask for a kind with "
                      "--kinds to make its share required)", highlight=False, soft_wrap=True)
    elif short_kinds:
        fail(f"tasks generate: kinds under {floor:.0%} of their share of --n {target} (--min-share): "
             f"{'; '.join(short_kinds)}; ask only the kinds this corpus gives (--kinds), raise "
             "tasks.generate.max_attempts or use a model writer", code=3)


def _print_tally(tally: "Tally") -> None:
    """Kept / asked per kind and per document, and the documents that gave nothing."""
    console.print(f"kept/asked per kind: {tally.per_kind_line()}", highlight=False, soft_wrap=True)
    docs = ", ".join(f"{escape(d)} {tally.kept_by_doc.get(d, 0)}/{a}" for d, a in sorted(tally.asked_by_doc.items()))
    console.print(f"kept/asked per document: {docs or 'none'}", highlight=False, soft_wrap=True)
    empty = tally.why_empty()
    if empty:
        total = len(set(tally.documents) | set(tally.asked_by_doc) | set(tally.unusable))
        console.print(f"[yellow]warning:[/] {len(empty)} of {total} documents gave no task: "
                      f"{escape('; '.join(empty))}", highlight=False, soft_wrap=True)


@tasks_app.command("report")
@friendly_errors
def report_cmd(
    workspace: Path = typer.Option(..., "-w", "--workspace", help="Workspace with generated tasks"),
    out: str = typer.Option(None, "--out", help="HTML file (default: <workspace>/tasks/generated_report.html)"),
    sample: int = typer.Option(20, "--sample", min=0, help="Tasks shown with their evidence crops"),
    seed: int = typer.Option(0, "--seed", help="Which tasks are sampled"),
) -> None:
    """One HTML page to judge generated tasks: counts per kind, rejection causes, sampled tasks with page crops."""
    from vrag_data.qgen.report import tasks_report
    from vrag_data.store import Workspace

    ws = Workspace(str(workspace))
    rep = tasks_report(ws, out, sample=sample, seed=seed)
    fmt = lambda d: ", ".join(f"{k} {v}" for k, v in d.items()) or "none"  # noqa: E731
    console.print(f"{rep.tasks} tasks (kept/asked per kind: {fmt(rep.kept_asked)}); {rep.sampled} sampled with crops; rejections: "
                  f"{fmt(rep.rejected)}; wrote {rep.path}", highlight=False, soft_wrap=True)
    if rep.missing_images:
        console.print(f"[yellow]warning:[/] {rep.missing_images} evidence crops have no page image in the workspace",
                      highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
