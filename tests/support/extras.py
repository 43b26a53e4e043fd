"""Markers for tests that need an optional extra: the suite also runs on Pythons where only `.[dev]` is installed
(`make test-py`), and there such a test skips, saying which extra it needs."""

from __future__ import annotations

import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")
