"""Thread counts follow the cores the process may use (a scheduler's CPU set), not the machine's core count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vrag_data.ingest.ocr import default_threads, usable_cores


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU sets are a Linux feature")
def test_threads_follow_the_cpu_set() -> None:
    code = "from vrag_data.ingest.ocr import default_threads, usable_cores; print(usable_cores(), default_threads(1))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    assert out.stdout.split() == ["1", "1"]


def test_threads_split_the_cores_between_workers() -> None:
    cores = usable_cores()
    assert default_threads(1) == cores
    assert default_threads(cores) == 1
    assert default_threads(cores * 4) == 1  # never zero
