"""A package installed for one test: a folder to put on `sys.path` holding `<name>.py` and its `.dist-info` with one
entry point, the way `pip install` leaves a plugin package (`importlib.metadata` finds it there)."""

from __future__ import annotations

import textwrap
from pathlib import Path


def site_package(tmp_path: Path, name: str, group: str, entry: str, module: str = "") -> Path:
    """`entry` (`key = module:object`) in entry-point `group` of a distribution `name`; `module` the source of
    `<name>.py` (none: the entry point names a module that does not exist)."""
    site = tmp_path / "site"
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
    if module:
        (site / f"{name}.py").write_text(textwrap.dedent(module))
    return site
