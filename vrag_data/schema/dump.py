"""Generate `schemas/<name>.schema.json` from the pydantic records and detect drift."""

from __future__ import annotations

import json
from pathlib import Path

from vrag_data.schema.records import ALL_MODELS


def render(name: str) -> str:
    return json.dumps(ALL_MODELS[name].model_json_schema(), indent=2, sort_keys=True) + "\n"


def dump(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ALL_MODELS:
        p = out_dir / f"{name}.schema.json"
        p.write_text(render(name))
        written.append(p)
    return written


def drifted(out_dir: Path) -> list[str]:
    """Files that are missing or differ from what the models generate."""
    bad = []
    for name in ALL_MODELS:
        p = out_dir / f"{name}.schema.json"
        if not p.is_file() or p.read_text() != render(name):
            bad.append(str(p))
    return bad
