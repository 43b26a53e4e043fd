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


def install_package(tmp_path: Path, source: Path, entry_points: dict[str, str], version: str = "0.1") -> Path:
    """Install the package folder `source` into `<tmp_path>/site` as pip would leave it (`--target`): the package,
    and `<name>-<version>.dist-info` with METADATA, RECORD and `entry_points.txt` (`group -> "key = target"`).
    Returns the folder to put on `sys.path` / PYTHONPATH; nothing is installed anywhere else."""
    import shutil

    site = tmp_path / "site"
    name = source.name
    dest = site / name
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(f"[{group}]\n{entry}\n\n" for group, entry in entry_points.items()))
    files = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files) + f"{name}-{version}.dist-info/RECORD,,\n")
    return site
