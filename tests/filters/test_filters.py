"""Filters: each rule on hand-built trajectories, verdict recording, chains and config overrides."""

from __future__ import annotations

import pytest

from tests.support.rewards_factory import make_task, make_traj
from vrag_data.config import ConfigError, FiltersConfig, RunConfig, parse_config
from vrag_data.filters import (
    Balance, Correctness, Dedup, Difficulty, FilterChain, FilterContext, RetrievalCompleteness, Structure,
    apply_chain, default_chain, difficulty_keep,
)
from vrag_data.recipe import get_recipe, resolve_recipe
from vrag_data.filters.registry import rl_chain
from vrag_data.schema.geometry_types import Box

TASK = make_task(answer="42", fmt="Int", pages=["doc_3"])


def ctx(**kw):
    return FilterContext(tasks={TASK.task_id: TASK}, **kw)


def traj(steps, sample=0, task=TASK, **kw):
    return make_traj(task, steps, sample=sample, **kw)


GOOD = [("search", "q", ["doc_1", "doc_3"]), ("crop", "doc_3", (100, 100, 400, 300)), ("answer", "42")]


def test_correctness_rules_judge_and_stored_score():
    right, wrong = traj(GOOD), traj(GOOD[:-1] + [("answer", "41")], sample=1)
    f = Correctness()
    v = f.score(right, ctx())
    assert v.passed and v.score == 1.0 and "rules" in v.reason
    v = f.score(wrong, ctx())
    assert not v.passed and "'41' vs '42'" in v.reason
    # a judge callable (e.g. the model judge) takes precedence over the rules
    v = f.score(wrong, ctx(judge=lambda t, task: 1.0))
    assert v.passed and "judge" in v.reason
    stored = wrong.model_copy(update={"extra": {"judge_score": 1.0}})
    assert f.score(stored, ctx()).passed
    unfinished = traj(GOOD[:-1], sample=2)
    assert not f.score(unfinished, ctx()).passed


def test_retrieval_completeness():
    task = make_task(pages=["doc_3", "doc_5"])
    c = FilterContext(tasks={task.task_id: task})
    f = RetrievalCompleteness()
    v = f.score(make_traj(task, [("search", "q", ["doc_3"]), ("answer", "42")]), c)
    assert not v.passed and "doc_5" in v.reason and v.score == 0.5
    v = f.score(make_traj(task, [("search", "q", ["doc_3"]), ("search", "q", ["doc_5"]), ("answer", "42")]), c)
    assert v.passed
    none = make_task(question="unanswerable?", answer="Not answerable", fmt="None", pages=[])
    assert f.score(make_traj(none, [("answer", "Not answerable")]), FilterContext(tasks={none.task_id: none})).passed


def test_structure_rules():
    f = Structure()
    assert f.score(traj(GOOD), ctx()).passed
    # crop of a page no search showed
    v = f.score(traj([("search", "q", ["doc_1"]), ("crop", "doc_3", (0, 0, 100, 100)), ("answer", "42")]), ctx())
    assert not v.passed and "not shown" in v.reason
    # (nearly) whole-page crop: 950 x 960 / 1e6 = 91% >= 90%
    v = f.score(traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 950, 960)), ("answer", "42")]), ctx())
    assert not v.passed and "covers 91%" in v.reason
    assert Structure(max_crop_area=0.95).score(
        traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 950, 960)), ("answer", "42")]), ctx()).passed
    # more than 10 retrievals
    many = [("search", f"q{i}", [f"doc_{i + 10}"]) for i in range(11)] + [("answer", "42")]
    v = f.score(traj(many), ctx())
    assert not v.passed and "11 retrievals > 10" in v.reason
    # invalid turns count only when required
    inv = traj([("search", "q", ["doc_3"]), ("invalid", "<search>oops"), ("answer", "42")])
    assert not f.score(inv, ctx()).passed
    assert Structure(require_valid=False).score(inv, ctx()).passed
    # VISOR: a crop must come immediately after a retrieval; a crop after a crop fails, a full-image crop fails
    visor = default_chain(get_recipe("visor")).filters[0]
    once = traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 100, 100)), ("answer", "42")])
    twice = traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 100, 100)), ("crop", "doc_3", (0, 0, 50, 50)), ("answer", "42")])
    assert visor.score(once, ctx()).passed
    v = visor.score(twice, ctx())
    assert not v.passed and "turn 2: crop not immediately preceded by a retrieval (after crop)" in v.reason
    assert visor.score(traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 950, 960)), ("answer", "42")]), ctx()).passed
    full = visor.score(traj([("search", "q", ["doc_3"]), ("crop", "doc_3", (0, 0, 1000, 1000)), ("answer", "42")]), ctx())
    assert not full.passed and "covers 100%" in full.reason


def test_structure_adjacent_and_box_inside_page():
    later = traj([("search", "q", ["doc_3"]), ("answer", "x"), ("crop", "doc_3", (0, 0, 100, 100))], sample=3)
    later = later.model_copy(update={"final_answer": "x", "status": "answered"})
    assert Structure(adjacent=False, require_valid=False).score(later, ctx()).passed
    v = Structure(adjacent=True, require_valid=False).score(later, ctx())
    assert not v.passed and "preceding retrieval" in v.reason
    # a crop whose raw box runs past the page edge (page size known)
    t = traj(GOOD)
    bad_box = Box(raw=(100.0, 100.0, 1200.0, 300.0), norm=(100, 71, 1000, 214))
    t = t.model_copy(update={"crops": [t.crops[0].model_copy(update={"box": bad_box})]})
    v = Structure().score(t, ctx(page_sizes={"doc_3": (1000, 1400)}))
    assert not v.passed and "outside page" in v.reason


def test_difficulty_rules_pure():
    wrong, right = ("x", False), ("42", True)
    assert difficulty_keep("all_wrong", [wrong])[0]
    assert not difficulty_keep("all_wrong", [right])[0]
    assert difficulty_keep("not_always_right", [right, wrong])[0]
    keep, why = difficulty_keep("not_always_right", [right, right])
    assert not keep and "always right" in why
    # UniDoc-RL RL curation: an attempt that retrieved the gold pages but answered wrong
    assert difficulty_keep("retrieved_but_wrong", [("42", True, True), ("x", False, True)])[0]
    assert not difficulty_keep("retrieved_but_wrong", [("42", True, True), ("x", False, False)])[0]
    assert not difficulty_keep("retrieved_but_wrong", [("x", False, False)] * 5)[0]
    assert not difficulty_keep("retrieved_but_wrong", [("x", False)])[0]
    with pytest.raises(ValueError):
        difficulty_keep("hard", [wrong])


def test_difficulty_filter_uses_student_results():
    t = traj(GOOD)
    f = Difficulty(rule="not_always_right")
    v = f.score(t, ctx(student_results={TASK.task_id: [("42", True)] * 8}))
    assert not v.passed and v.score == 1.0
    v = f.score(t, ctx(student_results={TASK.task_id: [("42", True)] * 7 + [("1", False)]}))
    assert v.passed and v.score == pytest.approx(7 / 8)
    # no student: only a fallback the config asked for (keep / drop), and the verdict says the rule was not applied
    keep = Difficulty(missing="keep").score(t, ctx())
    assert keep.passed and keep.reason.startswith("rule not applied")
    assert not Difficulty(missing="drop").score(t, ctx()).passed
    assert not f.score(t, ctx()).passed  # the default ("fail") never passes an item the rule did not judge


def _steps(n_search, crop=False):
    s = [("search", f"q{i}", [f"doc_{i}"]) for i in range(n_search)]
    if crop:
        s.append(("crop", "doc_0", (0, 0, 100, 100)))
    return s + [("answer", "42")]


def test_balance_steps_and_buckets():
    items = (
        [traj(_steps(1), sample=i) for i in range(9)]  # 2 steps, search only: 9 items
        + [traj(_steps(1, crop=True), sample=10 + i) for i in range(2)]  # 3 steps, search+crop: 2 items
        + [traj(_steps(2, crop=True), sample=15)]  # 4 steps, search+crop: 1 item
        + [traj(_steps(6), sample=20)]  # 7 steps: out of range
        + [traj([("answer", "42")], sample=21)]  # 1 step: out of range
    )
    vs = Balance().score_all(items, ctx())
    passed = [v.passed for v in vs]
    # bucket sizes 9, 2, 1: median 2, cap = ceil(2 x 2) = 4; the single-item bucket does not shrink the others
    assert passed == [True] * 4 + [False] * 5 + [True, True] + [True] + [False, False]
    assert "over cap 4" in vs[4].reason
    assert "7 steps outside 2-6" in vs[12].reason
    assert [v.passed for v in Balance(max_per_bucket=1).score_all(items[:11], ctx())] == [True] + [False] * 8 + [True, False]


def test_dedup_keeps_first_and_ignores_samples_of_one_task():
    q = "What was the total revenue of the company in 2019?"
    t1 = make_task(question=q)
    t2 = make_task(question="What was the total revenue of the company in 2019 ?", stem="doc2")  # same tokens
    t3 = make_task(question="Who signed the annual report?", stem="doc3")
    tasks = {t.task_id: t for t in (t1, t2, t3)}
    items = [make_traj(t1, GOOD, sample=0), make_traj(t1, GOOD, sample=1), make_traj(t2, GOOD), make_traj(t3, GOOD)]
    vs = Dedup().score_all(items, FilterContext(tasks=tasks))
    assert [v.passed for v in vs] == [True, True, False, True]
    assert t1.task_id in vs[2].reason
    assert [v.passed for v in Dedup(one_per_task=True).score_all(items, FilterContext(tasks=tasks))] == [
        True, False, False, True]


def test_dedup_minhash_path_finds_the_same_duplicates():
    tasks, items = {}, []
    for i in range(60):
        q = f"how many employees worked at plant number {i} in the year {2000 + i}"
        for j, stem in enumerate(("a", "b")):  # each question twice, from two documents
            t = make_task(question=q, stem=f"{stem}{i}")
            tasks[t.task_id] = t
            items.append(make_traj(t, GOOD, sample=j))
    c = FilterContext(tasks=tasks)
    exact = [v.passed for v in Dedup().score_all(items, c)]
    lsh = [v.passed for v in Dedup(minhash_above=10).score_all(items, c)]
    assert exact == lsh == [True, False] * 60


def test_apply_chain_records_every_verdict():
    trajs = [traj(GOOD, sample=0), traj(GOOD[:-1] + [("answer", "7")], sample=1),
             traj([("search", "q", ["doc_1"]), ("crop", "doc_3", (0, 0, 10, 10)), ("answer", "42")], sample=2)]
    chain = FilterChain.from_names(["structure", "correctness"])
    kept, verdicts = apply_chain(trajs, [TASK], chain)
    assert [t.sample for t in kept] == [0]
    # structure saw all 3, correctness saw the 2 survivors
    assert [(v.filter, v.passed) for v in verdicts] == [
        ("structure", True), ("structure", True), ("structure", False), ("correctness", True), ("correctness", False)]
    assert all(v.reason for v in verdicts)


def test_bad_record_becomes_a_failed_verdict():
    orphan = make_traj(make_task(question="unknown task?"), GOOD)
    kept, verdicts = apply_chain([orphan, traj(GOOD)], [TASK], FilterChain.from_names(["correctness"]))
    assert len(kept) == 1
    assert not verdicts[0].passed and "not found" in verdicts[0].reason


def test_default_chains_and_config_override():
    visor_r, evis_r, vrag_r = get_recipe("visor"), get_recipe("evisrag"), get_recipe("vrag_rl")
    assert default_chain(visor_r).names == ["structure", "retrieval_completeness", "correctness", "dedup"]
    assert default_chain(visor_r).filters[0].adjacent is True
    # EVisRAG's curriculum filter decides the RL data, not the SFT data; both chains cut the same 8:2 task split
    assert default_chain(evis_r).names == ["split", "correctness", "dedup"]
    assert rl_chain(evis_r).names == ["split", "difficulty", "rl_order"]
    assert rl_chain(evis_r).filters[1].rule == "not_always_right"
    assert (default_chain(evis_r).filters[0].part, rl_chain(evis_r).filters[0].part) == ("sft", "rl")
    with pytest.raises(ConfigError, match="filters.rl_options.evisrag.balance: the evisrag RL chain does not run balance"):
        rl_chain(evis_r, FiltersConfig(rl_options={"evisrag": {"balance": {"max_per_bucket": 3}}}))
    cfg = parse_config({"filters": {"chains": {"vrag_rl": ["correctness", "balance"]},
                                    "options": {"vrag_rl": {"balance": {"max_per_bucket": 3}}}}}).filters
    chain = default_chain(vrag_r, cfg)
    assert chain.names == ["correctness", "balance"] and chain.filters[1].max_per_bucket == 3
    with pytest.raises(ConfigError, match=r"filters.chains.vrag_rl: unknown filter\(s\) \['corectness'\]"):
        default_chain(vrag_r, FiltersConfig(chains={"vrag_rl": ["corectness"]}))
    with pytest.raises(ValueError, match="bad options"):
        FilterChain.from_names(["balance"], {"balance": {"maxx": 1}})
    # options apply over the recipe's own settings of that filter, and only to that recipe
    visor = default_chain(visor_r, FiltersConfig(options={"visor": {"structure": {"max_retrievals": 4}}})).filters[0]
    assert (visor.adjacent, visor.max_retrievals) == (True, 4)
    other = default_chain(vrag_r, FiltersConfig(options={"visor": {"structure": {"max_retrievals": 4}}})).filters[0]
    assert (other.adjacent, other.max_retrievals) == (False, vrag_r.filters[0].max_retrievals)
    with pytest.raises(ConfigError, match="filters.options.visor.structure: unknown option"):
        default_chain(visor_r, FiltersConfig(options={"visor": {"structure": {"adjacentt": True}}}))
    # an option for a filter the recipe's chain does not run would do nothing: it fails, naming the chain
    with pytest.raises(ConfigError, match="filters.options.visor.balance: the visor chain does not run balance "
                                          r"\(chain: structure, retrieval_completeness, correctness, dedup\)"):
        default_chain(visor_r, FiltersConfig(options={"visor": {"balance": {"max_per_bucket": 3}}}))
    with pytest.raises(TypeError, match="Recipe object"):
        default_chain("visor")
    with pytest.raises(ConfigError, match="filters.chains.vrag_rll: not a registered recipe"):
        resolve_recipe("vrag_rl", RunConfig(filters=FiltersConfig(chains={"vrag_rll": ["correctness"]})))


def test_saved_verdicts_drive_the_exporters_keep_rule(tmp_path):
    from vrag_data.augment import replace_queries
    from vrag_data.export.kept import Verdicts
    from vrag_data.filters import save_verdicts
    from vrag_data.schema.records import Verdict
    from vrag_data.store.shards import read_records

    good, bad = traj(GOOD, sample=0), traj(GOOD[:-1] + [("answer", "7")], sample=1)
    kept, verdicts = apply_chain([good, bad], [TASK], default_chain(get_recipe("vrag_rl")))
    run_dir = str(tmp_path / "runs" / "r1")
    path = save_verdicts(run_dir, verdicts)
    assert read_records(path, Verdict) == verdicts
    loaded = Verdicts.load(run_dir)
    assert loaded.keep(good) and not loaded.keep(bad)
    # an augmented copy inherits its source's verdicts through extra["source_traj_id"]
    assert loaded.keep(replace_queries(good, TASK)) and not loaded.keep(replace_queries(bad, TASK))
