"""The SFT export most trainer tests read: four records over the small trainer workspace at 84 x 56 pixels (built
once per test module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.train_workspace import build_workspace, write_sft_export


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sft-export")
    ws, _ = build_workspace(root / "ws", size=(84, 56))
    write_sft_export(ws, root / "export", n=4)
    return root / "export"
