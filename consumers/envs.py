"""Create (or reuse) one virtual environment per consumer, installed from the package registry at pinned versions.

    python consumers/envs.py <folder>          # <folder>/<name>/bin/python for each requirements-<name>.txt
    python consumers/envs.py --lock <folder>   # after a pin changed: resolve, then write locks/<name>.txt

`requirements-<name>.txt` holds the pins a user of that consumer installs; `locks/<name>.txt` holds every package of
the environment pip resolved from them, and is what an environment is built from (`--no-deps`: no resolver run, the
same set every time). The torch family (torch, torchvision, triton, nvidia-*, cuda-*: ~5.5 GB) is installed once per
distinct set into `<folder>/_shared-<hash>/` and put on each environment's path by a `.pth` file.
An environment is reused while its requirements and lock files are unchanged (a stamp holds their hash), so CI pays
for the installs once per cache folder. EasyR1 is not on the registry: its environment holds EasyR1's dependencies,
and its source comes from a checkout named by EASYR1_SRC or kept in `<folder>/src/EasyR1` (the environment is built
only when there is one). VRAG-RL's verl fork (VRAGRL_SRC or `<folder>/src/VRAG`) runs in the verl environment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCKS = HERE / "locks"
# packages whose registry wheels do not import beside the CPU torch here; each is stubbed where a consumer imports it
REMOVE_AFTER = {"llamafactory": ["torchaudio"]}
SHARED_NAMES = ("torch", "torchvision", "triton")
SHARED_PREFIXES = ("nvidia-", "cuda-")
# no byte-compiling at install (minutes of CPU for torch alone): Python compiles what a check imports, once
PIP_QUIET = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]


def wanted(folder: Path) -> list[str]:
    names = sorted(p.stem.removeprefix("requirements-") for p in HERE.glob("requirements-*.txt"))
    return [n for n in names if n != "easyr1" or os.environ.get("EASYR1_SRC") or (folder / "src" / "EasyR1").is_dir()]


def pins(path: Path) -> list[str]:
    """The requirement lines of a requirements or lock file, comments and blanks left out."""
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def is_shared(pin: str) -> bool:
    name = pin.split("==")[0].strip().lower().replace("_", "-")
    return name in SHARED_NAMES or name.startswith(SHARED_PREFIXES)


def _digest(*texts: bytes) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t)
    return h.hexdigest()[:16]


def _install_no_deps(python: Path, lines: list[str], target: Path | None = None) -> None:
    """pip install exactly these pins, no resolver run (into `target` when given)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        extra = ["--target", str(target)] if target else []
        subprocess.run([str(python), *PIP_QUIET, "--no-deps", *extra, "-r", f.name], check=True)
    finally:
        os.unlink(f.name)


def ensure_shared(folder: Path, python: Path, lines: list[str]) -> Path:
    """The torch family of a lock, installed once into a folder named by its pins' hash."""
    shared = folder / f"_shared-{_digest(chr(10).join(sorted(lines)).encode())}"
    stamp = shared / ".complete"
    if stamp.is_file():
        return shared
    shutil.rmtree(shared, ignore_errors=True)
    t0 = time.monotonic()
    print(f"consumer envs: installing the torch family ({len(lines)} packages) into {shared}", flush=True)
    _install_no_deps(python, lines, shared)
    stamp.touch()
    print(f"consumer envs: torch family ready in {time.monotonic() - t0:.0f} s", flush=True)
    return shared


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def ensure(folder: Path, name: str) -> Path:
    req = HERE / f"requirements-{name}.txt"
    lock = LOCKS / f"{name}.txt"
    digest = _digest(req.read_bytes(), lock.read_bytes() if lock.is_file() else b"")
    env = folder / name
    stamp = env / f".stamp-{digest}"
    py = env / "bin" / "python"
    if stamp.is_file() and py.is_file():
        return py
    shutil.rmtree(env, ignore_errors=True)
    t0 = time.monotonic()
    source = lock if lock.is_file() else req
    print(f"consumer env {name}: installing {source.relative_to(HERE)} into {env}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    if lock.is_file():
        lines = pins(lock)
        shared = [p for p in lines if is_shared(p)]
        if shared:
            (site_packages(py) / "_vrag_shared_torch.pth").write_text(f"{ensure_shared(folder, py, shared)}\n")
        own = [p for p in lines if not is_shared(p)]
        if own:
            _install_no_deps(py, own)
    else:
        if pins(req):  # a file of comments installs nothing
            subprocess.run([str(py), *PIP_QUIET, "-r", str(req)], check=True)
        for pkg in REMOVE_AFTER.get(name, []):
            subprocess.run([str(py), "-m", "pip", "uninstall", "--quiet", "-y", pkg], check=False)
    stamp.touch()
    print(f"consumer env {name}: ready in {time.monotonic() - t0:.0f} s", flush=True)
    return py


def write_lock(folder: Path, name: str) -> Path:
    """Resolve `requirements-<name>.txt` in a scratch environment and freeze it into locks/<name>.txt."""
    scratch = folder / f"_resolve-{name}"
    shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(scratch)], check=True)
    py = scratch / "bin" / "python"
    req = HERE / f"requirements-{name}.txt"
    if pins(req):
        subprocess.run([str(py), *PIP_QUIET, "-r", str(req)], check=True)
    for pkg in REMOVE_AFTER.get(name, []):
        subprocess.run([str(py), "-m", "pip", "uninstall", "--quiet", "-y", pkg], check=False)
    frozen = subprocess.run([str(py), "-m", "pip", "freeze", "--all", "--exclude", "pip", "--exclude", "setuptools",
                             "--exclude", "wheel"], check=True, capture_output=True, text=True).stdout
    LOCKS.mkdir(exist_ok=True)
    out = LOCKS / f"{name}.txt"
    out.write_text(f"# every package of the environment resolved from requirements-{name}.txt (envs.py --lock)\n"
                   + frozen)
    shutil.rmtree(scratch, ignore_errors=True)
    return out


if __name__ == "__main__":
    lock_mode = sys.argv[1:2] == ["--lock"]
    root = Path(sys.argv[2 if lock_mode else 1]).resolve()
    root.mkdir(parents=True, exist_ok=True)
    for n in wanted(root):
        print(write_lock(root, n) if lock_mode else ensure(root, n), flush=True)
