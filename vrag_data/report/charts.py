"""Small inline SVG charts and HTML tables for the offline report (no plotting library, no network).

Every label goes through `esc`; numbers are formatted here. Colours come from one fixed palette so the
same action kind has the same colour in every chart.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v == int(v) and abs(v) >= 1000:
            return f"{int(v):,}"
        return f"{v:.3f}" if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = 200, caption: str = "") -> str:
    """An HTML table; numbers right-aligned; at most `limit` rows (the rest is in the database)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for r in rows[:limit]:
        cells = "".join(
            f'<td class="num">{esc(fmt(v))}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool) else f"<td>{esc(fmt(v))}</td>"
            for v in r
        )
        body.append(f"<tr>{cells}</tr>")
    more = f'<p class="more">{len(rows) - limit} more rows in report.duckdb</p>' if len(rows) > limit else ""
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    if not rows:
        return f'<table>{cap}<tr>{head}</tr></table><p class="empty">no rows</p>'
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def hbars(items: Sequence[tuple[str, float]], title: str = "", width: int = 560, value_fmt=fmt, color: str = PALETTE[0]) -> str:
    """Horizontal bars, one per (label, value), scaled to the largest value."""
    if not items:
        return f'<p class="empty">{esc(title)}: no data</p>'
    row_h, label_w, top = 22, 150, 24 if title else 4
    h = top + row_h * len(items) + 6
    vmax = max((v for _, v in items), default=0) or 1
    bar_w = width - label_w - 80
    out = [f'<svg class="chart" role="img" width="{width}" height="{h}" viewBox="0 0 {width} {h}">']
    if title:
        out.append(f'<text x="0" y="15" class="title">{esc(title)}</text>')
    for i, (label, v) in enumerate(items):
        y = top + i * row_h
        w = max(0.0, bar_w * (v or 0) / vmax)
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{esc(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}"/>')
        out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 15}">{esc(value_fmt(v))}</text>')
    out.append("</svg>")
    return "".join(out)


def dense_bins(counts: Sequence[tuple[float, float]], starts: Sequence[float]) -> list[tuple[float, float]]:
    """Every bin of `starts` with its count (0 where `counts` has none): a histogram's x-axis stays linear."""
    have: dict[float, float] = {}
    for start, n in counts:
        key = round(float(start), 9)
        have[key] = have.get(key, 0.0) + float(n or 0)
    return [(b, have.get(round(float(b), 9), 0.0)) for b in starts]


def vbars(items: Sequence[tuple[str, float]], title: str = "", width: int = 560, height: int = 200, color: str = PALETTE[0]) -> str:
    """A histogram: vertical bars with the bin label below and the count above each bar."""
    if not items:
        return f'<p class="empty">{esc(title)}: no data</p>'
    top, bottom, left = 26 if title else 8, 34, 8
    plot_h = height - top - bottom
    n = len(items)
    slot = (width - 2 * left) / n
    vmax = max((v for _, v in items), default=0) or 1
    out = [f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    if title:
        out.append(f'<text x="0" y="15" class="title">{esc(title)}</text>')
    for i, (label, v) in enumerate(items):
        bh = plot_h * (v or 0) / vmax
        x = left + i * slot
        y = top + plot_h - bh
        out.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" height="{bh:.1f}" fill="{color}"><title>{esc(label)}: {esc(fmt(v))}</title></rect>')
        if n <= 30:
            out.append(f'<text x="{x + slot / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" class="small">{esc(fmt(v))}</text>')
        if n <= 30 or i % math.ceil(n / 20) == 0:
            out.append(f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle" class="small">{esc(label)}</text>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width - left}" y2="{top + plot_h}" stroke="#888"/>')
    out.append("</svg>")
    return "".join(out)


def stacked_shares(groups: Sequence[tuple[str, dict[str, float]]], keys: Sequence[str], title: str = "", width: int = 640) -> str:
    """One 100% bar per group (e.g. recipe), split by key (e.g. action kind), with a legend."""
    if not groups:
        return f'<p class="empty">{esc(title)}: no data</p>'
    colors = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}
    row_h, label_w, top = 24, 150, 24 if title else 4
    legend_h = 22
    h = top + row_h * len(groups) + legend_h + 8
    bar_w = width - label_w - 10
    out = [f'<svg class="chart" role="img" width="{width}" height="{h}" viewBox="0 0 {width} {h}">']
    if title:
        out.append(f'<text x="0" y="15" class="title">{esc(title)}</text>')
    for i, (label, shares) in enumerate(groups):
        y = top + i * row_h
        out.append(f'<text x="{label_w - 6}" y="{y + 16}" text-anchor="end">{esc(label)}</text>')
        x = float(label_w)
        total = sum(shares.values()) or 1
        for k in keys:
            w = bar_w * shares.get(k, 0) / total
            if w <= 0:
                continue
            out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{colors[k]}">'
                       f"<title>{esc(k)}: {shares.get(k, 0) / total:.1%}</title></rect>")
            x += w
    ly = top + row_h * len(groups) + 14
    lx = 0.0
    for k in keys:
        out.append(f'<rect x="{lx:.0f}" y="{ly - 9}" width="10" height="10" fill="{colors[k]}"/>')
        out.append(f'<text x="{lx + 14:.0f}" y="{ly}" class="small">{esc(k)}</text>')
        lx += 14 + 7 * len(str(k)) + 14
    out.append("</svg>")
    return "".join(out)
