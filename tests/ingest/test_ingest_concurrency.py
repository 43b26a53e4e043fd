"""Concurrent ingest with the layout model: threads of one process (Prefect's thread runner) and worker processes.

The layout model builds its ONNX sessions on first import; two threads importing it at once used to race on a
process-wide swap of onnxruntime's `SessionOptions` (`TypeError: function() argument 'code' must be code, not str`).
Each case runs in a fresh interpreter, so the model is imported for the first time under the concurrency tested."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.synth_workspace import cli

SCRIPT = """
import json, sys, threading
from vrag_data.ingest import ingest_paths
from vrag_data.ingest.options import IngestOptions
from vrag_data.store import Workspace
from vrag_data.store.corpus import load_errors
corpus, base, mode = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
def run(i, workers):
    ws = Workspace(f"{base}/ws{i}")
    s = ingest_paths([corpus], ws, IngestOptions(ocr="off", layout="pymupdf", workers=workers), progress=False)
    out[i] = [s.n_pages, [e.reason for e in load_errors(ws) if e.stage != "notice"]]
if mode == "threads":
    ts = [threading.Thread(target=run, args=(i, 1)) for i in range(3)]
    [t.start() for t in ts]; [t.join() for t in ts]
else:
    run(0, 2)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("conc-corpus")
    cli("sample-corpus", d, "--docs", "2", "--seed", "3")
    return d


@pytest.mark.soak
@pytest.mark.parametrize("mode", ["threads", "processes"])
@pytest.mark.slow
def test_concurrent_first_imports_of_the_layout_model(corpus, tmp_path, mode):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(corpus), str(tmp_path), mode],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got and all(n > 0 and errors == [] for n, errors in got.values()), got


@pytest.mark.slow
def test_a_retry_that_succeeds_leaves_no_error_row(corpus, tmp_path):
    from vrag_data.ingest import ingest_paths
    from vrag_data.ingest.options import IngestOptions
    from vrag_data.schema.records import IngestError
    from vrag_data.store import Workspace
    from vrag_data.store.corpus import append_errors, load_errors

    ws = Workspace(str(tmp_path / "ws"))
    ws.makedirs()
    pdf = sorted(p for p in corpus.iterdir() if p.suffix == ".pdf")[0]
    # the row a failed first attempt left behind (the race above wrote such rows)
    append_errors(ws, [IngestError(path=str(pdf), stage="render", reason="TypeError: transient")])
    s = ingest_paths([str(pdf)], ws, IngestOptions(ocr="off", layout="off", workers=1), progress=False)
    assert s.n_pages > 0
    assert [e for e in load_errors(ws) if e.path == str(pdf) and e.stage != "notice"] == []
