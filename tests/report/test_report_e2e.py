"""The report over a real run: sample corpus -> oracle synth (visor) -> filter (with augmentations) -> export,
checked against what the exporter itself read and wrote."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

import pytest

from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.export.kept import Verdicts, iter_trajectories
from vrag_data.report import build_report
from vrag_data.store import Workspace


@pytest.mark.slow
def test_report_matches_the_exporter_on_an_oracle_run(tmp_path: Path) -> None:
    root = sample_workspace(tmp_path)
    cli("synth", "-w", root, "--recipe", "visor", "--policy", "oracle", "--run", "v1", "-q")
    cli("filter", "-w", root, "--run", "v1")
    cli("export", "-w", root, "--run", "v1", "--format", "llamafactory")
    ws = Workspace(str(root))
    res = build_report(ws)
    trajs = list(iter_trajectories(ws.run("v1")))
    verdicts = Verdicts.load(ws.run("v1"))
    summary = json.loads((Path(ws.exports) / "v1" / "summary.json").read_text())
    assert any(t.extra.get("augmentation") for t in trajs)  # filter wrote aug-visor.parquet
    with duckdb.connect(ws.report_db, read_only=True) as c:
        funnel = dict(c.execute("SELECT stage, n FROM stage_funnel WHERE recipe = 'visor'").fetchall())
        assert funnel["trajectories"] == len(trajs) == summary["n_trajectories"] == res.counts["trajectories"]
        assert funnel["kept"] == sum(verdicts.keep(t) for t in trajs) == summary["n_kept"]
        assert funnel["exported"] == summary["stats"]["per_recipe"]["visor"]
        assert funnel["pages"] == res.counts["pages"] > 0
        turns = dict(c.execute("SELECT action_kind, n FROM action_distribution WHERE recipe = 'visor' AND dimension = 'all'").fetchall())
        want: dict[str, int] = {}
        for t in trajs:
            for u in t.turns:
                want[u.action.kind] = want.get(u.action.kind, 0) + 1
        assert turns == want
        assert c.execute("SELECT count(*) FROM crops").fetchone()[0] == sum(len(t.crops) for t in trajs) > 0
