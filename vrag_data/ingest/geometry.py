"""Pure rectangle helpers shared by layout, TOC and adapter code (x0, y0, x1, y1 tuples)."""

from __future__ import annotations

Rect = tuple[float, float, float, float]


def area(r: Rect) -> float:
    return max(0.0, r[2] - r[0]) * max(0.0, r[3] - r[1])


def intersection(a: Rect, b: Rect) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def covered(a: Rect, b: Rect) -> float:
    """Share of `a` that lies inside `b` (0..1)."""
    aa = area(a)
    return intersection(a, b) / aa if aa > 0 else 0.0


def center_in(inner: Rect, outer: Rect) -> bool:
    cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
    return outer[0] <= cx <= outer[2] and outer[1] <= cy <= outer[3]


def scale(r: Rect, sx: float, sy: float) -> Rect:
    return (r[0] * sx, r[1] * sy, r[2] * sx, r[3] * sy)


def clamp(r: Rect, w: float, h: float) -> Rect:
    x0, y0, x1, y1 = (min(max(v, 0.0), lim) for v, lim in zip(r, (w, h, w, h)))
    return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def h_overlap(a: Rect, b: Rect) -> float:
    """Horizontal overlap as a share of the narrower box."""
    inter = min(a[2], b[2]) - max(a[0], b[0])
    narrow = min(a[2] - a[0], b[2] - b[0])
    return max(0.0, inter) / narrow if narrow > 0 else 0.0


def v_gap(a: Rect, b: Rect) -> float:
    """Vertical distance between two boxes (0 when they overlap vertically)."""
    return max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
