"""The flows take every workspace path from `Workspace` and merge their shards' stats with `merge_shard_stats`."""

from __future__ import annotations

import re
from pathlib import Path

from vrag_data.store.run_stats import merge_shard_stats
from vrag_data.store.workspace import Workspace

FLOWS = Path(__file__).resolve().parents[2] / "flows"


def test_shard_stats_add_up_counts_and_count_tables_not_ratios():
    shards = [{"finished": 3, "error": 1, "tokens": 120.5, "episodes_per_s": 2.0, "per_status": {"answered": 3, "error": 1}},
              {"finished": 2, "error": 0, "tokens": 80.0, "episodes_per_s": 4.0, "per_status": {"answered": 2}, "done": True},
              {}]
    assert merge_shard_stats(shards) == {"finished": 5, "error": 1, "tokens": 200.5, "per_status": {"answered": 5, "error": 1}}


def test_workspace_names_every_path_the_flows_use(tmp_path):
    ws = Workspace(str(tmp_path))
    assert ws.export_summary("r1") == f"{tmp_path}/exports/r1/summary.json" and ws.export_dir("r1") == f"{tmp_path}/exports/r1"
    assert ws.index_manifest("bm25") == f"{tmp_path}/index/bm25/manifest.json"
    assert ws.task_shard("generated") == f"{tmp_path}/tasks/generated.parquet"
    assert ws.generate_manifest == f"{tmp_path}/tasks/generate_manifest.json"
    spelled = [f"{p.name}:{i}" for p in sorted(FLOWS.glob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"\bws\.path\(|manifest\.json|summary\.json|\.parquet\b", line)]
    assert not spelled, f"the flows spell workspace paths themselves: {spelled}"
