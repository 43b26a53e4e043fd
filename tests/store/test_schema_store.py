"""Records round-trip through parquet shards; schemas/ matches the models; config errors are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from vrag_data.config import ConfigError, load_config, parse_config
from vrag_data.schema import Box
from vrag_data.schema.records import Action, Message, Provenance, Task, Trajectory, Turn
from vrag_data.store import Workspace, read_records, write_records
from vrag_data.store.shards import read_table

REPO = Path(__file__).resolve().parents[2]


def _traj(i: int) -> Trajectory:
    return Trajectory(
        traj_id=f"tr_{i}",
        run_id="r1",
        task_id=f"t_{i}",
        sample=0,
        recipe="vrag_rl",
        prompt=[Message(role="user", text="q?")],
        turns=[Turn(idx=0, assistant="<search>q</search>", action=Action(kind="search", query="q"))],
        provenance=Provenance(recipe="vrag_rl", policy="oracle"),
        extra={"k": [1, 2]} if i % 2 else {},
    )


def test_trajectories_round_trip_through_shards(tmp_path: Path) -> None:
    ws = Workspace(str(tmp_path)).makedirs()
    path = ws.path("runs", "r1", "trajectories", "part-0.parquet")
    recs = [_traj(i) for i in range(5)]
    assert write_records(path, recs, Trajectory) == 5
    back = read_records(path, Trajectory)
    assert back == recs
    table = read_table(ws.path("runs", "r1", "trajectories"))
    assert table.column("status").to_pylist() == ["answered"] * 5  # scalar columns stay queryable
    assert not list((tmp_path / "runs" / "r1" / "trajectories").glob(".tmp-*"))


@given(
    st.integers(1, 5000), st.integers(1, 5000), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)
)
def test_box_norm_is_within_0_1000(w: int, h: int, a: float, b: float, c: float, d: float) -> None:
    box = Box.from_raw((a * w, b * h, c * w, d * h), w, h)
    assert all(0 <= v <= 1000 for v in box.norm)
    assert abs(box.norm[0] - round(a * 1000)) <= 1


def test_task_rejects_unknown_fields() -> None:
    with pytest.raises(Exception):
        Task.model_validate({"task_id": "t", "question": "q", "answer": "a", "doc_ids": [], "doc_stems": [], "bogus": 1})


def test_config_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("synth:\n  samples: many\n  unknown_key: 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    msg = str(err.value)
    assert "\n" not in msg and "bad.yaml" in msg and "synth.samples" in msg and "unknown_key" in msg
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="unknown role"):
        parse_config({"roles": {"oracle_of_delphi": {}}})


@pytest.mark.slow
def test_schemas_folder_matches_models(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "vrag_data.cli.main", "schemas"]
    ok = subprocess.run([*cli, "check"], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    drift = tmp_path / "schemas"
    subprocess.run([*cli, "dump", "--out", str(drift)], check=True, capture_output=True)
    (drift / "task.schema.json").write_text("{}")
    bad = subprocess.run([*cli, "check", "--out", str(drift)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "task.schema.json" in bad.stderr


def test_folder_reads_only_shards_of_the_requested_record(tmp_path: Path) -> None:
    """tasks/ holds task shards next to an error log: reading tasks must not choke on the log."""
    from vrag_data.schema.records import IngestError

    folder = tmp_path / "tasks"
    task = Task(task_id="t1", question="q", answer="a", doc_ids=["d"], doc_stems=["s"])
    write_records(str(folder / "a.parquet"), [task], Task)
    write_records(str(folder / "import_errors.parquet"), [IngestError(path="x", stage="import", reason="r")], IngestError)
    assert read_records(str(folder), Task) == [task]
    assert len(read_records(str(folder), IngestError)) == 1
