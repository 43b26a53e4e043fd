"""`vrag-data export --for vragrl`: rows VRAG-RL's verl fork can train on. A recipe whose loop the fork cannot run
(MM-Doc-R1: planner, seeker ending in <FINISH>, reader, answer agent) is refused in one line naming what to use
instead; every other recipe exports. The fork's EVisRAG rows carry their pages as bytes (no images/ beside them) and
the shipped reward scores a rollout the fork decodes with its end-of-turn token, from the extra_info the fork keeps."""

from __future__ import annotations

import io
import sys

import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.support.oracle_runs import oracle_runs
from vrag_data.cli.main import app

REFUSED = {"mmdoc_r1"}  # the recipes whose loop the fork cannot run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return oracle_runs(tmp_path_factory.mktemp("fork") / "ws")


def export(ws, run: str, out, *more: str):
    return CliRunner().invoke(app, ["export", "-w", str(ws.root), "--run", run, "--format", "verl", "--out", str(out), *more])


@pytest.mark.slow
def test_a_recipe_the_fork_cannot_run_is_refused_in_one_line_and_the_others_export(runs, tmp_path):
    ws, run_ids = runs
    assert REFUSED < set(run_ids) and len(run_ids) >= 4
    for recipe, run in run_ids.items():
        out = tmp_path / recipe
        res = export(ws, run, out, "--for", "vragrl")
        if recipe in REFUSED:
            lines = res.output.strip().splitlines()
            assert res.exit_code != 0 and len(lines) == 1, res.output
            assert lines[0].startswith(f"error: {recipe}: not exported --for vragrl") and "export without --for" in lines[0]
            assert "Traceback" not in res.output and not out.exists()  # nothing written
            assert export(ws, run, out).exit_code == 0  # the same run exports for the other trainers
        else:
            assert res.exit_code == 0, (recipe, res.output)
            assert (out / "verl" / "vragrl.yaml").is_file()
            assert sum(pq.read_metadata(p).num_rows for p in (out / "verl").glob("*.parquet")) > 0, recipe


def _rows(out) -> list[dict]:
    return [r for p in sorted((out / "verl").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def test_the_forks_evisrag_rows_embed_their_pages_and_score_a_rollout_ending_in_im_end(runs, tmp_path, monkeypatch):
    ws, run_ids = runs
    out = tmp_path / "evisrag"
    res = export(ws, run_ids["evisrag"], out, "--for", "vragrl")
    assert res.exit_code == 0, res.output
    assert not (out / "images").exists()  # the bytes are in the rows: nothing else holds them a second time
    rows = _rows(out)
    assert rows and all(r["images"] for r in rows)
    for r in rows:
        for im in r["images"]:
            assert Image.open(io.BytesIO(im["bytes"])).size[0] > 0
    row = next(r for r in rows if r["extra_info"]["question"] == "What was Acme revenue in 2021?")
    gt = row["reward_model"]["ground_truth"]
    # the fork's judge reads `ground_truth` as its reference: the plain answer, not EVisRAG's tagged target
    assert gt == "18.5 million dollars" == row["extra_info"]["answer"] and row["data_source"] == "rag"
    assert "<evidence>" not in gt and "<answer>" not in gt

    # the reward as the fork loads it: the file its config names, from the export folder
    monkeypatch.syspath_prepend(str(out / "reward"))
    monkeypatch.delitem(sys.modules, "vragrl_reward", raising=False)
    import vragrl_reward

    # the fork replaces extra_info by these four keys before scoring
    fork_extra = {"file_name": row["file_name"], "reference_page": row["reference_page"],
                  "question": row["extra_info"]["question"], "answer": row["extra_info"]["answer"]}

    def score(reply: str) -> float:
        return vragrl_reward.compute_score(data_source=row["data_source"], solution_str=reply + "<|im_end|>",
                                           ground_truth=gt, extra_info=fork_extra)

    evidence = "<evidence>\n[1]: revenue 18.5 million dollars\n[2]: no relevant information\n</evidence>\n"
    # the fork's float is the format term (its judge grades the answer against `gt`, its NDCG the pages): a one-turn
    # reply in EVisRAG's form passes it whatever its answer; a reply out of form does not, so the judge is not asked
    assert score(f"<observe>three pages</observe>\n{evidence}<think>page 1 gives it</think>\n<answer>18.5 million dollars</answer>") == 1.0
    assert score(f"<observe>three pages</observe>\n{evidence}<think>a guess</think>\n<answer>12 million dollars</answer>") == 1.0
    assert score("<answer>18.5 million dollars</answer>") == 0.0
