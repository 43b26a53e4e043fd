"""Vector charts (bar, line, pie) with titles, axes, legends and value labels.

Each function draws inside `area` (PDF points) and returns, per category, the rectangle of the label that
shows its value: that label is where the answer to a chart question is visible.
"""

from __future__ import annotations

import math

import pymupdf

from vrag_data.sample.canvas import ASC, Canvas, Rect, text_width, union

PALETTE = (
    (0.20, 0.40, 0.70), (0.85, 0.45, 0.15), (0.25, 0.60, 0.35), (0.75, 0.25, 0.30),
    (0.50, 0.40, 0.70), (0.55, 0.55, 0.20),
)


def _centered(cv: Canvas, cx: float, baseline: float, text: str, size: float, bold: bool = False) -> Rect:
    return cv.text(cx - text_width(text, size, bold) / 2, baseline, text, size, bold)


def _legend(cv: Canvas, x: float, y: float, items: list[str], size: float) -> None:
    shape = cv.page.new_shape()
    for i, label in enumerate(items):
        yy = y + i * size * 1.6
        shape.draw_rect(pymupdf.Rect(x, yy, x + size, yy + size))
        shape.finish(color=None, fill=PALETTE[i % len(PALETTE)])
        cv.text(x + size * 1.5, yy + size * 0.85, label, size)
    shape.commit()


def _axes(cv: Canvas, plot: pymupdf.Rect, vmax: int, size: float, unit: str) -> float:
    """Draw the y axis with 5 ticks; return the value per point of height."""
    step = max(1, math.ceil(vmax / 4 / 100) * 100)
    top = step * 4
    shape = cv.page.new_shape()
    shape.draw_line(plot.bl, plot.tl)
    shape.draw_line(plot.bl, plot.br)
    for k in range(5):
        y = plot.y1 - plot.height * k / 4
        shape.draw_line((plot.x0 - 3, y), (plot.x0, y))
        label = f"{step * k:,}"
        cv.text(plot.x0 - 6 - text_width(label, size * 0.85), y + size * 0.3, label, size * 0.85,
                color=(0.35, 0.35, 0.35))
    shape.finish(color=(0.2, 0.2, 0.2), width=0.7)
    shape.commit()
    cv.text(plot.x0, plot.y0 - size * 0.9, unit, size * 0.85, color=(0.35, 0.35, 0.35))
    return top / plot.height


def bar_chart(cv: Canvas, area: Rect, title: str, data: dict[str, int], unit: str, size: float) -> dict[str, Rect]:
    x0, y0, x1, y1 = area
    _centered(cv, (x0 + x1) / 2, y0 + ASC * size * 1.2, title, size * 1.2, bold=True)
    plot = pymupdf.Rect(x0 + size * 4, y0 + size * 4.2, x1 - size * 9, y1 - size * 2.2)
    per_pt = _axes(cv, plot, max(data.values()), size, unit)
    n = len(data)
    slot = plot.width / n
    bar_w = slot * 0.55
    labels: dict[str, Rect] = {}
    shape = cv.page.new_shape()
    for i, (cat, v) in enumerate(data.items()):
        cx = plot.x0 + slot * (i + 0.5)
        top = plot.y1 - v / per_pt
        shape.draw_rect(pymupdf.Rect(cx - bar_w / 2, top, cx + bar_w / 2, plot.y1))
        shape.finish(color=None, fill=PALETTE[i % len(PALETTE)])
        labels[cat] = _centered(cv, cx, top - size * 0.45, f"{v:,}", size)
        _centered(cv, cx, plot.y1 + size * 1.3, cat, size * 0.8)
    shape.commit(overlay=False)
    _legend(cv, plot.x1 + size * 1.2, plot.y0, list(data), size * 0.8)
    return labels


def line_chart(cv: Canvas, area: Rect, title: str, data: dict[str, int], unit: str, size: float) -> dict[str, Rect]:
    x0, y0, x1, y1 = area
    _centered(cv, (x0 + x1) / 2, y0 + ASC * size * 1.2, title, size * 1.2, bold=True)
    plot = pymupdf.Rect(x0 + size * 4, y0 + size * 4.2, x1 - size * 2, y1 - size * 2.2)
    per_pt = _axes(cv, plot, max(data.values()), size, unit)
    n = len(data)
    slot = plot.width / n
    points = [(plot.x0 + slot * (i + 0.5), plot.y1 - v / per_pt) for i, v in enumerate(data.values())]
    shape = cv.page.new_shape()
    shape.draw_polyline(points)
    shape.finish(color=PALETTE[0], width=1.6, closePath=False)
    for p in points:
        shape.draw_circle(p, 2.6)
    shape.finish(color=PALETTE[0], fill=(1, 1, 1), width=1.2)
    shape.commit(overlay=False)
    labels: dict[str, Rect] = {}
    for i, ((cat, v), (px, py)) in enumerate(zip(data.items(), points)):
        # Alternate labels above/below the line when the neighbour is higher, so labels never sit on the line.
        below = i > 0 and points[i - 1][1] < py - size and (i + 1 >= n or points[i + 1][1] < py - size)
        base = py + size * 1.6 if below else py - size * 0.6
        labels[cat] = _centered(cv, px, base, f"{v:,}", size)
        _centered(cv, px, plot.y1 + size * 1.3, cat, size * 0.8)
    return labels


def pie_chart(cv: Canvas, area: Rect, title: str, data: dict[str, int], size: float) -> dict[str, Rect]:
    """Wedges plus a label column on the right, one `Segment: NN%` line per wedge in its colour."""
    x0, y0, x1, y1 = area
    _centered(cv, (x0 + x1) / 2, y0 + ASC * size * 1.2, title, size * 1.2, bold=True)
    top = y0 + size * 2.8
    r = min((x1 - x0) * 0.28, (y1 - top) / 2 - size)
    cx, cy = x0 + (x1 - x0) * 0.34, top + (y1 - top) / 2
    start = -90.0
    shape = cv.page.new_shape()
    for i, v in enumerate(data.values()):
        sweep = 360.0 * v / 100
        # A wedge as a polygon (centre + points along the arc): exact, and the same bytes on every platform.
        steps = max(2, int(sweep / 4))
        arc = [(cx + r * math.cos(math.radians(start + sweep * k / steps)),
                cy + r * math.sin(math.radians(start + sweep * k / steps))) for k in range(steps + 1)]
        shape.draw_polyline([(cx, cy), *arc, (cx, cy)])
        shape.finish(color=(1, 1, 1), fill=PALETTE[i % len(PALETTE)], width=1.0, closePath=True)
        start += sweep
    shape.commit()
    labels: dict[str, Rect] = {}
    lx = x0 + (x1 - x0) * 0.68
    ly = cy - len(data) * size * 1.1
    key = cv.page.new_shape()
    for i, (seg, v) in enumerate(data.items()):
        base = ly + i * size * 2.2 + ASC * size
        key.draw_rect(pymupdf.Rect(lx, base - size * 0.8, lx + size * 0.8, base))
        key.finish(color=None, fill=PALETTE[i % len(PALETTE)])
        name = cv.text(lx + size * 1.3, base, f"{seg}:", size)
        value = cv.text(name[2] + size * 0.1, base, f"{v}%", size, bold=True)
        labels[seg] = union([name, value])
    key.commit()
    return labels
