"""Create (or reuse) one virtual environment per consumer, installed from the package registry at pinned versions.

    python consumers/envs.py <folder>        # <folder>/<name>/bin/python for each requirements-<name>.txt

An environment is reused while its requirements file is unchanged (a stamp holds the file's hash), so CI pays for
the installs once per cache folder. EasyR1 is not on the registry: its environment holds EasyR1's dependencies,
and its source comes from a checkout named by EASYR1_SRC or kept in `<folder>/src/EasyR1` (the environment is built
only when there is one). VRAG-RL's verl fork (VRAGRL_SRC or `<folder>/src/VRAG`) runs in the verl environment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# packages whose registry wheels do not import beside the CPU torch here; each is stubbed where a consumer imports it
REMOVE_AFTER = {"llamafactory": ["torchaudio"]}


def wanted(folder: Path) -> list[str]:
    names = sorted(p.stem.removeprefix("requirements-") for p in HERE.glob("requirements-*.txt"))
    return [n for n in names if n != "easyr1" or os.environ.get("EASYR1_SRC") or (folder / "src" / "EasyR1").is_dir()]


def ensure(folder: Path, name: str) -> Path:
    req = HERE / f"requirements-{name}.txt"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()[:16]
    env = folder / name
    stamp = env / f".stamp-{digest}"
    py = env / "bin" / "python"
    if stamp.is_file() and py.is_file():
        return py
    shutil.rmtree(env, ignore_errors=True)
    t0 = time.monotonic()
    print(f"consumer env {name}: installing {req.name} into {env}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if any(line.split("#")[0].strip() for line in req.read_text().splitlines()):  # a file of comments installs nothing
        subprocess.run([*pip, "-r", str(req)], check=True)
    for pkg in REMOVE_AFTER.get(name, []):
        subprocess.run([str(py), "-m", "pip", "uninstall", "--quiet", "-y", pkg], check=False)
    stamp.touch()
    print(f"consumer env {name}: ready in {time.monotonic() - t0:.0f} s", flush=True)
    return py


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve()
    root.mkdir(parents=True, exist_ok=True)
    for n in wanted(root):
        ensure(root, n)
