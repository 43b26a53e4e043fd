"""Shared fixtures. Offline hygiene is set before anything imports prefect, datasets or ray."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest

_TMP = Path(tempfile.mkdtemp(prefix="vrag-tests-"))
os.environ.setdefault("PREFECT_HOME", str(_TMP / "prefect"))
os.environ.setdefault("PREFECT_SERVER_API_HOST", "127.0.0.1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HOME", str(_TMP / "hf"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from hypothesis import settings  # noqa: E402

from vrag_data.recipe import recipe_names  # noqa: E402

# the suite runs on two workers beside servers and subprocesses: a property's examples are checked, not timed
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

recipe_names()  # registers the installed recipes (and their grammars) once, as the CLI does

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    """The real research corpus beside the repository; tests that need it skip when it is absent."""
    if not (SHARED_CORPUS / "qa.jsonl").is_file():
        pytest.skip(f"real corpus not found at {SHARED_CORPUS} (research-only data, not shipped with the project)")
    return SHARED_CORPUS


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _TMP


@pytest.fixture(autouse=True)
def _one_heavy_test_at_a_time(request: pytest.FixtureRequest):
    """Tests marked `heavy` (a Ray instance, a Prefect server with a browser) take one lock shared by the suite's
    workers: two Ray instances starting at once on two cores miss Ray's own 30 s startup limit."""
    if request.node.get_closest_marker("heavy") is None:
        yield
        return
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    with (Path(tempfile.gettempdir()) / f"vrag-tests-heavy-{run}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
