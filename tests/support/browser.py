"""A real browser for UI tests: Debian's Chromium (`apt-get install chromium`) driven by Playwright.

The test is skipped, with the reason, when Chromium is not installed (`.ci/run` installs it). Screenshots are
kept in `test-artifacts/` at the repository root (git-ignored), named by the test, so a person can look."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# no background traffic: this machine's network is closed, and a browser's own calls home only slow it down
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    return path


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    exe = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(90_000)  # a loaded two-core machine runs the suite beside the page
            yield page
        finally:
            browser.close()


def keep_screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path
