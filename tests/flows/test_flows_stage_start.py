"""A flow starts like every command: an export a killed export had set aside comes back (and the flow's log says so in
one line), and the temp files a killed stage left in the workspace go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.roles import ORACLE_ROLES

prefect = pytest.importorskip("prefect")
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from flows.flows import ingest  # noqa: E402

pytestmark = pytest.mark.slow


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_flow_puts_a_set_aside_export_back_and_sweeps_orphaned_temp_files(tmp_path):
    ws = tmp_path / "ws"
    out = ws / "exports" / "r1"
    # what kill -9 leaves mid-export: the earlier export set aside, the new one half written, a temp file of the dead
    (out / ".previous-export" / "llamafactory").mkdir(parents=True)
    (out / ".previous-export" / "llamafactory" / "dataset_info.json").write_text('{"earlier": 1}')
    (out / ".previous-export" / "summary.json").write_text('{"run_id": "r1"}')
    (out / "llamafactory").mkdir()
    (out / "llamafactory" / "part-0.json").write_text("[{")
    (out / ".export.lock").write_text("")
    orphan = ws / f".tmp-{_dead_pid()}-pipeline.json"
    orphan.write_text("{")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"workspace": str(ws), "ingest": {"sample_corpus": 1, "ocr": "off", "workers": 1},
                                   "synth": {"recipes": ["vrag_rl"]}, "roles": ORACLE_ROLES}))
    with prefect_test_harness(server_startup_timeout=300):
        ingest(str(cfg))
        import httpx
        from prefect.settings import PREFECT_API_URL

        logs = httpx.post(f"{PREFECT_API_URL.value()}/logs/filter", json={"limit": 200}, timeout=30).json()
    said = [x["message"] for x in logs if "interrupted" in x["message"]]
    assert len(said) == 1 and str(out) in said[0] and "earlier export" in said[0], said
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name != ".export.lock") == [
        "llamafactory", "llamafactory/dataset_info.json", "summary.json"]
    assert (out / "llamafactory" / "dataset_info.json").read_text() == '{"earlier": 1}'
    assert not orphan.exists() and not [p for p in ws.rglob(".tmp-*") if os.path.isfile(p)]
    assert Path(ws / "corpus").is_dir()  # the flow did its own work
