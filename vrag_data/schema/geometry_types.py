"""Box types shared by every record: raw page pixels plus 0-1000 normalised."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

Quad = tuple[float, float, float, float]
NormQuad = tuple[int, int, int, int]


def _norm(v: float, size: int) -> int:
    return max(0, min(1000, round(v * 1000 / size))) if size > 0 else 0


class Box(BaseModel):
    """A box on a rendered page: `raw` in pixels of the page image, `norm` in 0-1000 of its size."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    raw: Quad
    norm: NormQuad

    @classmethod
    def from_raw(cls, raw: Quad, width: int, height: int) -> "Box":
        x1, y1, x2, y2 = (float(v) for v in raw)
        return cls(raw=(x1, y1, x2, y2), norm=(_norm(x1, width), _norm(y1, height), _norm(x2, width), _norm(y2, height)))

    @classmethod
    def from_norm(cls, norm: NormQuad, width: int, height: int) -> "Box":
        x1, y1, x2, y2 = (int(v) for v in norm)
        raw = (x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000)
        return cls(raw=raw, norm=(x1, y1, x2, y2))
