"""An EasyR1 EVisRAG sample says whether its images hold the evidence: the sample's `sufficient`, else the tagged
target the exporter writes ("insufficient to answer" exactly when they do not). A sample with neither is refused in one
line, never scored as sufficient; every EVisRAG row the EasyR1 export writes carries `sufficient`, equal to its target."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.rewards import easyr1  # noqa: E402
from vrag_data.rewards.verl import MissingRewardKey  # noqa: E402

# one image, nothing relevant on it: the honest reply says the context is insufficient
HONEST = ("<observe>one page</observe><evidence>\n[1]: no relevant information\n</evidence>"
          "<think>nothing here</think><answer>insufficient to answer</answer>")


def test_a_sample_without_sufficient_or_a_tagged_target_is_refused():
    # before: gold pages unknown -> "every gold page shown" held vacuously: sufficient 1.0, the honest reply scored 0
    with pytest.raises(MissingRewardKey) as err:
        easyr1.compute_score([{"response": HONEST, "ground_truth": "42", "task_id": "t7"}])
    msg = str(err.value)
    assert "\n" not in msg and "easyr1 row t7" in msg and "'sufficient'" in msg and "--format easyr1" in msg


def test_the_label_decides_when_given_and_the_tagged_target_when_not():
    # labelled insufficient: the honest reply's answer is the target (derivation 1)
    out = easyr1.compute_score([{"response": HONEST, "ground_truth": "42", "sufficient": False}])[0]
    assert (out["sufficient"], out["derivation"], out["format"]) == (0.0, 1.0, 1.0)
    # labelled sufficient: "insufficient to answer" shares no token with "42"
    out = easyr1.compute_score([{"response": HONEST, "ground_truth": "42", "sufficient": True}])[0]
    assert (out["sufficient"], out["derivation"]) == (1.0, 0.0)
    # no label, the exporter's tagged target: its answer tells it
    target = "<evidence>\n[1]: no relevant information\n</evidence>\n<answer>insufficient to answer</answer>"
    out = easyr1.compute_score([{"response": HONEST, "ground_truth": target}])[0]
    assert (out["sufficient"], out["derivation"], out["overall"]) == (0.0, 1.0, 1.0)


def test_every_evisrag_row_of_the_easyr1_export_carries_sufficient(tmp_path):
    from vrag_data.export import export_run

    ws = build_workspace(tmp_path / "ws")  # its EVisRAG trajectory recorded no sufficiency label
    export_run(ws, "r1", formats=["easyr1"], out_dir=tmp_path / "o", recipes=run_recipes())
    rows = [json.loads(line) for f in sorted((tmp_path / "o" / "easyr1").rglob("*.jsonl"))
            for line in f.read_text().splitlines()]
    evisrag = [r for r in rows if r["recipe"] == "evisrag"]
    assert len(evisrag) == 1
    row = evisrag[0]
    # task t2's gold page docB_1 is image 1 of 3: sufficient, and the target answers "blue"
    assert row["shown_pages"] == ["docB_1", "docB_2", "docA_1"] and row["gold_pages"] == ["docB_1"]
    assert row["sufficient"] is True and row["answer"].endswith("<answer>blue</answer>")
    # the row as EasyR1 hands it over (its fields passed through) scores its own target perfectly
    assert easyr1.compute_score([{**row, "response": row["answer"], "ground_truth": row["answer"]}])[0]["derivation"] == 1.0
