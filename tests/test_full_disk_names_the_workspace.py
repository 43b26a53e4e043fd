"""A full disk names the workspace the stage writes into and that device's free space, wherever the command is run
from (a write that fails names no file: the line used to say "the device holding ." with the free space of the
current folder). The disk is a real small tmpfs (mounting needs root; elsewhere the test is skipped with the reason)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.disk import small_tmpfs
from tests.support.synth_workspace import cli
from vrag_data.cli.main import app


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", 32) as mnt:
        yield mnt


def _fill(disk: Path) -> None:
    with open(disk / "filler.bin", "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass


def test_a_full_workspace_disk_is_named_with_its_own_free_space(tmp_path, small_disk, monkeypatch):
    docs = tmp_path / "docs"
    cli("sample-corpus", docs, "--docs", "1", "--seed", "0")
    ws = small_disk / "ws"
    cli("ingest", "-w", ws, docs, "--ocr", "off", "--layout", "off", "--workers", "1", "-q")
    _fill(small_disk)
    elsewhere = tmp_path / "cwd"  # the command runs from a folder on another device, with room to spare
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert shutil.disk_usage(elsewhere).free > 2**20 and shutil.disk_usage(small_disk).free < 2**20
    res = CliRunner().invoke(app, ["tasks", "import", str(docs / "qa.jsonl"), "-w", str(ws)])
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert res.exit_code == 2 and len(errors) == 1, res.output
    m = re.search(r"no space left on the device holding (\S+) \(([\d,.]+) MiB free\)", errors[0])
    assert m is not None, errors[0]
    # the workspace, and its device's free space (under 1 MiB: the disk is full), not the current folder's
    assert Path(m.group(1)) == ws and float(m.group(2).replace(",", "")) < 1.0
