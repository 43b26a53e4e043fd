"""The reward entry points read what the exporter writes: RL records built by `vrag_data.export.rl`,
stored in parquet and read back the way trainers read them (numpy arrays, JSON `gold_boxes`)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.rewards_factory import make_task
from vrag_data.export.hf import extra_info_row
from vrag_data.export.rl import evidence_ground_truth, task_to_rl
from vrag_data.rewards import easyr1
from vrag_data.rewards.verl import compute_score



@pytest.fixture(autouse=True)
def _rule_judge(monkeypatch):
    """These tests check the rule-judged rewards; the rule scorers are asked for explicitly, as a user would."""
    monkeypatch.setenv("VRAG_REWARD_JUDGE", "rules")

def _roundtrip(row: dict, tmp_path) -> dict:
    path = tmp_path / "rl.parquet"
    pd.DataFrame([row]).to_parquet(path)
    return pd.read_parquet(path).iloc[0].to_dict()


def test_verl_row_from_the_exporter(tmp_path):
    task = make_task(answer="42", fmt="Int", pages=["doc_3"], boxes={"doc_3": [(100, 100, 300, 400)]})
    rec = task_to_rl(task, prompt=[{"role": "user", "content": "q"}], images=[], recipe="unidoc_rl", index=0,
                     data_source="rag")
    row = _roundtrip({"data_source": rec.data_source, "ground_truth": rec.reward_model.ground_truth,
                      "extra_info": extra_info_row(rec.extra_info)}, tmp_path)
    assert isinstance(row["extra_info"]["gold_boxes"], str)  # JSON in parquet
    extra = dict(row["extra_info"])
    extra["crops"] = [{"page_id": "doc_3", "box": [100, 100, 300, 300]}]
    extra["search_results"] = [["doc_1", "doc_3"]]
    solution = ("<think>a</think><search>revenue</search>\n<think>b</think><bbox>[100, 100, 300, 300]</bbox>\n"
                "<think>c</think><answer>42</answer>")
    out = compute_score(row["data_source"], solution, row["ground_truth"], extra)
    assert out["judge"] == 1.0 and out["crop"] == pytest.approx(2 / 3) and out["format"] == 1.0
    assert out["ndcg"] == pytest.approx(0.6309, abs=1e-4)


def test_easyr1_batch_reward_on_exporter_ground_truth():
    task = make_task(answer="42", fmt="Int", pages=["doc_3"])
    gt = evidence_ground_truth(task, ["doc_9", "doc_3"], ["[1]: no relevant information", "[2]: revenue was 42"])
    good = ("<observe>two pages</observe>\n<evidence>\n[1]: no relevant information\n[2]: revenue was 42\n"
            "</evidence>\n<think>so</think>\n<answer>42</answer>")
    bad = "<answer>41</answer>"
    scores = easyr1.compute_score([{"response": good, "ground_truth": gt}, {"response": bad, "ground_truth": gt}])
    assert scores[0]["overall"] == pytest.approx(1.0)
    assert scores[1]["format"] == 0.0 and scores[1]["derivation"] == 0.0
    assert set(scores[0]) == set(scores[1])


def test_verl_entry_point_asks_the_configured_judge(tmp_path, monkeypatch):
    from tests.support.openai_server import Faults, OpenAIServer
    from vrag_data.rewards.judge_client import JudgeConfigError
    from vrag_data.rewards.verl import compute_score

    monkeypatch.delenv("VRAG_REWARD_JUDGE", raising=False)
    extra = {"reward": "vrag_rl", "question": "What was revenue?", "gold_pages": ["doc_3"], "retrieved_pages": ["doc_3"],
             "search_results": [["doc_3"]]}
    sol = "<think>s</think><search>revenue</search><think>a</think><answer>forty-two</answer>"
    with pytest.raises(JudgeConfigError, match="VRAG_JUDGE_URL"):
        compute_score("rag", sol, "42", extra)  # no judge and no explicit rules: one line, no silent fallback
    cache = str(tmp_path / "judge.sqlite")
    with OpenAIServer(reply=["<judge>True</judge>"]) as srv:
        kw = {"judge_url": srv.base_url, "judge_model": "teacher", "judge_cache": cache}
        got = compute_score("rag", sol, "42", extra, **kw)
        assert got["judge"] == 1.0  # the rules would say "forty-two" != 42; the judge decides
        assert got["score"] == pytest.approx(0.7 * 1.0 + 0.1 * 1.0 + 0.2 * 1.0)
        n = len(srv.requests)
        compute_score("rag", sol, "42", extra, **kw)
        assert len(srv.requests) == n  # the same question is asked once (durable cache)
        # VISOR, retrieval incomplete: the honesty check, 0.2 when the judge accepts the refusal
        visor = {**extra, "reward": "visor", "gold_pages": ["doc_3", "doc_4"]}
        v = compute_score("rag", "<think>s</think><search>q</search><answer>I cannot tell</answer>", "42", visor, **kw)
        assert v["answer"] == pytest.approx(0.2)
        body = srv.requests[-1].body["messages"][0]["content"]
        assert "42" not in srv.requests[-1].body["messages"][-1]["content"] and body  # honesty prompt: no reference
    with OpenAIServer(reply=["<judge>True</judge>"], faults=Faults(p500=1.0)) as down:
        kw = {"judge_url": down.base_url, "judge_model": "teacher"}
        with pytest.raises(RuntimeError, match=f"judge endpoint {down.base_url}"):
            compute_score("rag", sol.replace("forty-two", "forty-three"), "42", extra, **kw)


def test_visor_reward_without_the_agent_loops_page_lists():
    """A verl rollout scored on its exported row (`search_results: []`, no `retrieved_pages`: no agent loop filled
    them) that names no page: which pages the agent saw is unknown, so the honesty gate is not applied and the answer
    is judged (rules here). Right 1.0 > wrong 0.0; the score dict says retrieval was unknown. With the page lists the
    gate applies as before."""
    extra = {"reward": "visor", "question": "What was net income?", "gold_pages": ["doc_3"], "search_results": []}
    right = "<think>a</think><search>net income</search>\n<think>b</think><answer>673</answer>"
    wrong = right.replace("673", "512")
    r, w = compute_score("rag", right, "673", extra), compute_score("rag", wrong, "673", extra)
    assert (r["answer"], w["answer"]) == (1.0, 0.0) and r["score"] > w["score"]
    assert r["retrieval_known"] == 0.0 and r["format_penalty"] == 0.0
    # the agent loop says the gold page was never retrieved: VISOR's honesty gate decides (a guess earns nothing)
    gated = compute_score("rag", right, "673", {**extra, "retrieved_pages": ["doc_1"]})
    assert gated["answer"] == 0.0 and gated["retrieval_known"] == 1.0
    # ...and when it was retrieved, the answer is judged
    seen = compute_score("rag", right, "673", {**extra, "retrieved_pages": ["doc_3"]})
    assert seen["answer"] == 1.0 and seen["retrieval_complete"] == 1.0


def test_easyr1_reward_scores_other_recipes_with_their_own_reward():
    """EasyR1 hands the reward only the response and the ground truth: a non-evidence row's JSON ground truth names
    its reward (VRAG-RL here: 0.7 judge + 0.1 format + 0.2 NDCG)."""
    import json

    gt = json.dumps({"data_source": "rag", "ground_truth": "42",
                     "extra_info": {"reward": "vrag_rl", "question": "q", "gold_pages": ["d_1"], "retrieved_pages": ["d_1"],
                                    "search_results": [["d_1"]]}})
    good = "<think>a</think><search>q</search><think>b</think><answer>42</answer>"
    right, wrong = easyr1.compute_score([{"response": good, "ground_truth": gt},
                                         {"response": good.replace("42", "7"), "ground_truth": gt}])
    assert right["overall"] == pytest.approx(1.0) and wrong["overall"] == pytest.approx(0.3)
    assert set(right) == set(wrong) and "judge" in right
