"""The package supports Python 3.11-3.13 (`requires-python`): CI runs on one; here every other interpreter of that
range found on PATH compiles every module of the library, the recipes and the flows (syntax and grammar the older or
newer parser refuses fail here, without installing the dependencies for each version)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSIONS = ("3.11", "3.12", "3.13")


def test_requires_python_covers_the_supported_versions():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"].startswith(">=3.11") and "<3.14" in meta["requires-python"]
    assert {f"Programming Language :: Python :: {v}" for v in VERSIONS} <= set(meta["classifiers"])


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_sources_compile_on(version, tmp_path):
    exe = sys.executable if version == f"{sys.version_info[0]}.{sys.version_info[1]}" else shutil.which(f"python{version}")
    if exe is None:
        pytest.skip(f"python{version} not on PATH")
    env = {**os.environ, "PYENV_VERSION": version, "PYTHONPYCACHEPREFIX": str(tmp_path)}  # a pyenv shim picks by it
    r = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, env=env)
    if r.returncode != 0:  # a shim for a version that is not installed
        pytest.skip(f"python{version}: {r.stderr.strip()[:200]}")
    r = subprocess.run([exe, "-m", "compileall", "-q", "-x", r"/\.", *(str(REPO / d) for d in ("vrag_data", "pipelines", "flows"))],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
