"""A full disk: one line naming the path and the free space, no temp file left, and an export written over an earlier
one that cannot finish leaves the earlier one exactly as it was. The disk is a real small tmpfs (mounting needs root,
which the CI and the development machine have; elsewhere the test is skipped with the reason)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.disk import small_tmpfs
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app

pytestmark = pytest.mark.slow


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", 48) as mnt:
        yield mnt


def _fill(disk: Path, leave: int) -> None:
    """Fill `disk` until `leave` bytes are free (0: until a write fails)."""
    with open(disk / "filler.bin", "wb", buffering=0) as f:
        try:
            f.write(b"\0" * max(0, shutil.disk_usage(disk).free - max(leave, 4096)))
            while not leave:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".export.lock"}


def test_an_export_over_an_earlier_one_on_a_full_disk_leaves_the_earlier_one_as_it_was(tmp_path_factory, small_disk):
    ws = sample_workspace(tmp_path_factory.getbasetemp())
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "full-disk", "-q")
    out = small_disk / "export"
    cli("export", "-w", ws, "--run", "full-disk", "--format", "llamafactory", "--out", out)
    before = _digest(out)
    assert len(before) > 5
    _fill(small_disk, leave=64 * 1024)
    res = CliRunner().invoke(app, ["export", "-w", str(ws), "--run", "full-disk", "--format", "llamafactory",
                                   "--format", "hf", "--format", "verl", "--out", str(out)])
    lines = [x for x in res.output.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    assert res.exit_code == 2, res.output
    assert len(errors) == 1 and "no space left on the device holding" in errors[0] and "MiB free" in errors[0], res.output
    assert "Traceback" not in res.output and "Errno 28" not in res.output
    assert _digest(out) == before  # the earlier export, file for file
    leftovers = [p for p in out.rglob("*") if p.name.startswith(".tmp") or p.name.endswith(".tmp")
                 or p.name == ".previous-export"]
    assert not leftovers, leftovers
    # space again: the export finishes over the earlier one and drops nothing it needs
    (small_disk / "filler.bin").unlink()
    cli("export", "-w", ws, "--run", "full-disk", "--format", "llamafactory", "--format", "hf", "--out", out)
    assert (out / "hf").is_dir() and not (out / ".previous-export").exists()


def test_a_stage_on_a_full_disk_says_so_in_one_line_and_leaves_no_temp_file(tmp_path, small_disk):
    docs = tmp_path / "docs"
    cli("sample-corpus", docs, "--docs", "1", "--seed", "0")
    ws = small_disk / "ws"
    cli("ingest", "-w", ws, docs, "--ocr", "off", "--layout", "off", "--workers", "1", "-q")
    _fill(small_disk, leave=0)
    res = CliRunner().invoke(app, ["tasks", "import", str(docs / "qa.jsonl"), "-w", str(ws)])
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert res.exit_code != 0 and len(errors) == 1 and "no space left" in errors[0], res.output
    assert "Traceback" not in res.output
    assert not [p for p in ws.rglob(".tmp-*")]
