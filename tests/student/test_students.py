"""Students where the papers put them: SFT vs RL chains, the 8:2 task split, simple -> complex order, quality-rejected
tasks first, and an off-format student that never makes a task hard."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.openai_server import OpenAIServer
from tests.support.rewards_factory import make_task, make_traj
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.filters import FilterContext, RlOrder, TaskSplit, apply_chain, difficulty_keep
from vrag_data.filters.judging import reference_for
from vrag_data.filters.registry import FilterChain
from vrag_data.schema.records import Verdict
from vrag_data.store.run import RunDir
from vrag_data.store.workspace import Workspace
from vrag_data.tasks.store import load_tasks
from vrag_data.rewards.judge_prompts import unfenced


def test_split_is_disjoint_exact_and_cuts_by_the_task_id_hash():
    ids = [f"t{i:02d}" for i in range(50)]
    # hand-computed: sha256("|t00")[:16] / 2**64 = 0.727 (late in the order, SFT side); the 10 ids (0.2 x 50) first in
    # that order form the RL side; t48 is the 10th at 0.1357, t41 the 11th at 0.1553 (a 0.2 threshold would take 14)
    assert int(hashlib.sha256(b"|t00").hexdigest()[:16], 16) / 2**64 > 0.7
    assert 0.135 < int(hashlib.sha256(b"|t48").hexdigest()[:16], 16) / 2**64 < int(hashlib.sha256(b"|t41").hexdigest()[:16], 16) / 2**64 < 0.2
    rl = {"t03", "t07", "t08", "t17", "t25", "t29", "t36", "t47", "t48", "t49"}
    tasks = [make_task(question=f"q {i}?") .model_copy(update={"task_id": i}) for i in ids]
    trajs = [make_traj(t, [("answer", "42")]) for t in tasks]
    sft_kept, _ = apply_chain(trajs, tasks, FilterChain([TaskSplit(part="sft")]))
    rl_kept, _ = apply_chain(trajs, tasks, FilterChain([TaskSplit(part="rl")]))
    assert {t.task_id for t in rl_kept} == rl and len(sft_kept) == 40  # exactly 8:2
    assert not {t.task_id for t in sft_kept} & rl
    # a small run still gets its RL share: 10 tasks -> 8:2, never 10:0
    small = trajs[:10]
    rl_small, _ = apply_chain(small, tasks[:10], FilterChain([TaskSplit(part="rl")]))
    assert {t.task_id for t in rl_small} == {"t07", "t08"}


def test_split_leaves_a_benchmarks_test_tasks_whole_on_both_sides():
    """Test-split tasks are evaluation data: both chains keep every one (the export's test split holds the whole test
    set under SFT and RL), and the 8:2 cut is made over the train tasks alone: the same RL side as without them."""
    ids = [f"t{i:02d}" for i in range(50)]
    tasks = [make_task(question=f"q {i}?").model_copy(update={"task_id": i}) for i in ids]
    tests = [make_task(question=f"test q {i}?").model_copy(update={"task_id": f"x{i}", "split": "test"}) for i in range(7)]
    trajs = [make_traj(t, [("answer", "42")]) for t in tasks + tests]
    sft_kept, vs = apply_chain(trajs, tasks + tests, FilterChain([TaskSplit(part="sft")]))
    rl_kept, _ = apply_chain(trajs, tasks + tests, FilterChain([TaskSplit(part="rl")]))
    test_ids = {t.task_id for t in tests}
    assert {t.task_id for t in rl_kept} - test_ids == {"t03", "t07", "t08", "t17", "t25", "t29", "t36", "t47", "t48", "t49"}
    assert test_ids <= {t.task_id for t in rl_kept} and test_ids <= {t.task_id for t in sft_kept}
    assert len(sft_kept) == 40 + 7
    assert all("test-split task" in v.reason for v in vs if v.task_id in test_ids)


def test_unparseable_replies_never_make_a_task_hard():
    bad = [("", None, True)] * 5  # every reply off format
    for rule in ("all_wrong", "retrieved_but_wrong", "not_always_right"):
        keep, why = difficulty_keep(rule, bad)
        assert not keep and "5 unparseable" in why and "difficulty unknown" in why
    # judged attempts decide; the unparseable ones count neither way
    assert difficulty_keep("all_wrong", [("x", False, True), ("", None, True)])[0] is True
    assert difficulty_keep("not_always_right", [("42", True, True), ("", None, True)])[0] is False
    assert difficulty_keep("retrieved_but_wrong", [("x", False, False), ("y", False, True), ("", None, True)])[0] is True


def test_rl_order_puts_quality_rejected_first_then_simple_first():
    a, b, c = (make_task(question=f"question {k}?") for k in "abc")
    ta, tb, tc = (make_traj(t, [("answer", "42")]) for t in (a, b, c))
    # b failed the quality filter (correctness); student accuracy: a 1/4, b 2/4, c 3/4
    sft = {tb.traj_id: [Verdict(run_id="r", traj_id=tb.traj_id, task_id=b.task_id, filter="correctness", passed=False)]}
    acc = {a.task_id: [("x", True)] + [("x", False)] * 3, b.task_id: [("x", True)] * 2 + [("x", False)] * 2,
           c.task_id: [("x", True)] * 3 + [("x", False), ("", None)]}
    ctx = FilterContext(student_results=acc, sft_verdicts=sft)
    _, vs = apply_chain([ta, tb, tc], [a, b, c], FilterChain([RlOrder(first="quality_rejected", order="simple_first")]), ctx)
    rank = {v.task_id: v.score for v in vs}
    assert rank == {b.task_id: 0.0, c.task_id: 1.0, a.task_id: 2.0}  # rejected b first, then c (0.75) before a (0.25)
    _, vs = apply_chain([ta, tb, tc], [a, b, c], FilterChain([RlOrder(order="simple_first")]), FilterContext(student_results=acc))
    assert [v.task_id for v in sorted(vs, key=lambda v: v.score)] == [c.task_id, b.task_id, a.task_id]


def _answers(ws):  # noqa: ANN001, ANN202 - question -> gold answer, as the always-right student knows it
    return {t.question.strip(): t for t in load_tasks(Workspace(str(ws)))}


@pytest.mark.slow
def test_evisrag_student_decides_rl_data_only_and_off_format_is_unparseable(tmp_path_factory, tmp_path):
    ws = sample_workspace(tmp_path_factory.getbasetemp())
    # a student is named at synth (its RL chain needs one); the filter's config points it at the model under test
    cli("synth", "-w", ws, "--recipe", "evisrag", "--policy", "oracle", "--set", "roles.student.kind=extractive",
        "--run", "students-evis", "-q")
    run = RunDir(str(ws / "runs" / "students-evis"))
    tasks = _answers(ws)
    # the recipe's reference for the pages a question retrieves: the gold answer, or "insufficient to answer" where the
    # top-k pages miss a gold page (read from the oracle teacher's episode, which ran the same retrieval)
    by_id = {t.task_id: t for t in tasks.values()}
    gold = {by_id[e.task_id].question.strip(): reference_for(e, by_id[e.task_id]) for e in run.episodes()}

    def right(req):  # noqa: ANN001, ANN202 - the recipe's own format, the recipe's reference answer
        texts = [p["text"] for m in req["messages"] for p in
                 ([{"text": m["content"]}] if isinstance(m["content"], str) else m["content"]) if "text" in p]
        q = next(x.split("Question: ", 1)[1].strip() for x in texts if "Question: " in x)
        n = sum(1 for m in req["messages"] if not isinstance(m["content"], str) for p in m["content"] if p.get("type") == "image_url")
        lines = "\n".join(f"[{i}]: e" for i in range(1, n + 1))  # one evidence line per image shown
        return f"<observe>o</observe><evidence>{lines}</evidence><think>t</think><answer>{gold[q]}</answer>"

    def judge(req):  # noqa: ANN001, ANN202 - a judge that compares the two strings
        text = req["messages"][-1]["content"]
        text = text if isinstance(text, str) else text[0]["text"]
        ref, pred = (x.strip().lower() for x in unfenced(text)[1:])
        return f"<judge>{ref == pred}</judge>"

    cfg = tmp_path / "f.yaml"
    with OpenAIServer(reply=right, models=["s"]) as student, OpenAIServer(reply=judge, models=["j"]) as jd:
        cfg.write_text(yaml.safe_dump({"roles": {"student": {"endpoints": [{"base_url": student.base_url, "model": "s"}]},
                                                 "judge": {"endpoints": [{"base_url": jd.base_url, "model": "j"}]}}}))
        cli("filter", "-w", ws, "--run", "students-evis", "--config", cfg)
        asked = [r for r in student.requests if "<evidence>" in str(r.body)]
    assert asked  # the student was given the recipe's own prompt
    sft = run.verdicts()
    rl = run.rl_verdicts()
    assert rl is not None
    episodes = list(run.episodes())
    sft_tasks = {t.task_id for t in episodes if sft.keep(t)}
    rl_side = {t.task_id for t in apply_chain(episodes, list(tasks.values()), FilterChain([TaskSplit(part="rl")]))[0]}
    assert sft_tasks and not sft_tasks & rl_side  # SFT data non-empty, and never from an RL task
    assert not any(rl.keep(t) for t in episodes)  # the always-right student drops every RL task
    att = pq.read_table(run.student_attempts_file("rl")).to_pylist()
    assert att and {a["task_id"] for a in att} and all(a["outcome"] == "right" for a in att)
    assert len(att) == 8 * len({t.task_id for t in episodes})

    with OpenAIServer(reply="I think the answer is 42.", models=["off"]) as student, OpenAIServer(reply=judge, models=["j"]) as jd:
        cfg.write_text(yaml.safe_dump({"roles": {"student": {"endpoints": [{"base_url": student.base_url, "model": "off"}]},
                                                 "judge": {"endpoints": [{"base_url": jd.base_url, "model": "j"}]}}}))
        cli("filter", "-w", ws, "--run", "students-evis", "--config", cfg)
    att = pq.read_table(run.student_attempts_file("rl")).to_pylist()
    assert att and all(a["outcome"] == "unparseable" and a["correct"] is None for a in att)
    rl = run.rl_verdicts()
    assert rl is not None and not any(rl.keep(t) for t in run.episodes())  # off format is not "hard"
