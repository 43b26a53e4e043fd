"""The markdown artifact every flow run publishes: the summary table, shard outcomes and where the outputs are."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vrag_data.report.summary import COLUMNS, HEADERS


def _cell(v: Any, key: str) -> str:
    if v is None:
        return "–"
    if key.endswith("_rate"):
        return f"{v:.0%}"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def summary_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_no trajectories yet_\n"
    head = "| " + " | ".join(HEADERS[c] for c in COLUMNS) + " |"
    rule = "|" + "|".join("---" if c == "recipe" else "---:" for c in COLUMNS) + "|"
    body = ["| " + " | ".join(_cell(r.get(c), c) for c in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body]) + "\n"


def shard_table(shards: list[dict[str, Any]]) -> str:
    if not shards:
        return ""
    per: dict[str, Counter[str]] = {}
    for s in shards:
        per.setdefault(s["stage"], Counter())["cached" if s["state"] == "Cached" else "failed" if s["failed"] else "ran"] += 1
    lines = ["| stage | ran | cached (skipped) | failed |", "|---|---:|---:|---:|"]
    lines += [f"| {stage} | {c['ran']} | {c['cached']} | {c['failed']} |" for stage, c in per.items()]
    failed = [s for s in shards if s["failed"]]
    if failed:
        lines += ["", "**Failed shards** (after retries; re-run the flow to retry only these):", ""]
        lines += [f"- {s['stage']} {s['label']}: {s['message']}" for s in failed]
    return "\n".join(lines) + "\n"


def render(title: str, summary: dict[str, Any]) -> str:
    parts = [f"# {title}", "", f"- workspace: `{summary.get('workspace')}`", f"- runner: {summary.get('runner')}"]
    if summary.get("config"):
        parts.append(f"- config: `{summary['config']}`")
    rep = summary.get("report") or {}
    if rep.get("db"):
        parts += [f"- report: `{rep['db']}` and `{rep['html']}`"]
    elif rep.get("error"):
        parts += [f"- report failed: {rep['error']}"]
    parts += ["", "## Summary", "", summary_table(rep.get("summary") or [])]
    shards = shard_table(summary.get("shards") or [])
    if shards:
        parts += ["## Shards", "", shards]
    exports = summary.get("exports") or {}
    if exports:
        parts += ["## Exports", "", "| recipe | run | folder (hf/, llamafactory/, verl/, easyr1/) |", "|---|---|---|"]
        parts += [f"| {e['recipe']} | {e['run_id']} | `{e['dir']}` |" for e in exports.values()]
        parts.append("")
    for line in summary.get("notes") or []:
        parts.append(f"- {line}")
    return "\n".join(parts) + "\n"


def publish(key: str, title: str, summary: dict[str, Any]) -> str:
    """Create the artifact (when running under a flow) and return its markdown."""
    from prefect.artifacts import create_markdown_artifact

    markdown = render(title, summary)
    create_markdown_artifact(markdown=markdown, key=key, description=title)
    return markdown
