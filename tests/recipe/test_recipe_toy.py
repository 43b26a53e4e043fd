"""A sixth recipe, defined here and nowhere else, runs through every stage without touching a library file:
synth (oracle) -> filter (its own chain and augmentation) -> every export format (its own hints) -> report ->
the verl reward entry point. Also: one owner of the run folder (newest record wins, stale verdicts stop the
export), run ids that follow the recipe's description, and no recipe name or `pipelines` import in the library."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.roles import ORACLE_ROLES
from tests.support.synth_workspace import sample_workspace
from tests.support.toy_recipe import TOY
from vrag_data.config import RunConfig
from vrag_data.errors import VragError
from vrag_data.export import export_run
from vrag_data.export.formats import format_names
from vrag_data.recipe import recipe_names, register, resolve_recipe, unregister
from vrag_data.rewards.verl import compute_score
from vrag_data.schema.records import Trajectory
from vrag_data.store import Workspace, write_records
from vrag_data.store.run import RunDir
from vrag_data.curate.postprocess import judge_and_filter
from vrag_data.synth.run import default_run_id, synth

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy():
    register(TOY)
    yield TOY
    unregister(TOY.name)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return sample_workspace(tmp_path_factory.getbasetemp())


def oracle_cfg(**synth) -> RunConfig:
    return RunConfig.model_validate({"roles": ORACLE_ROLES, "synth": synth})


@pytest.mark.slow
def test_toy_recipe_runs_through_every_stage(toy, ws, tmp_path):
    assert "toy_crop" in recipe_names()
    cfg = oracle_cfg()
    res = synth(str(ws), cfg, resolve_recipe("toy_crop", cfg), progress=False)  # the entry point resolves
    n_tasks = res.n_tasks
    assert res.recipe == "toy_crop" and res.stats["finished"] == n_tasks
    run = RunDir(str(ws / "runs" / res.run_id))
    trajs = list(run.episodes())
    assert len(trajs) == n_tasks and all(t.recipe == "toy_crop" for t in trajs)
    assert any(t.action.kind == "crop" for tr in trajs for t in tr.turns)  # the oracle crops the gold region (crop_gold)
    manifest = run.manifest()
    assert manifest.config["recipe"]["export"]["max_pixels"] == 200704

    filt = judge_and_filter(str(ws), res.run_id, cfg, toy)
    assert filt.chain == ["structure", "correctness"] and filt.recipe == "toy_crop"
    assert filt.n_augmented == filt.n_kept > 0  # the toy augmentation ran on every kept trajectory
    assert run.verdict_state()[0] == "fresh"

    out = tmp_path / "export"
    summary = export_run(Workspace(str(ws)), res.run_id, format_names(), out_dir=out)
    assert summary.n_kept == 2 * filt.n_kept
    lf = yaml.safe_load((out / "llamafactory" / "sft_toy_crop_qwen2_5vl.yaml").read_text())
    assert (lf["image_max_pixels"], lf["learning_rate"], lf["cutoff_len"], lf["dataset"]) == (200704, 2.0e-5, 8192, "vragdata_toy_crop")
    assert "toy's own table" in (out / "llamafactory" / "sft_toy_crop_qwen2_5vl.yaml").read_text().splitlines()[0]
    rows = pq.read_table(next((out / "verl").glob("*.parquet"))).to_pylist()
    assert rows and {r["data_source"] for r in rows} == {"toy_source"}
    assert {r["extra_info"]["reward"] for r in rows} == {"vrag_rl"} and {r["extra_info"]["recipe"] for r in rows} == {"toy_crop"}
    for fmt in format_names():
        assert summary.counts.get(fmt), fmt

    # verl scores a row with the reward the recipe names: the gold answer in a well-formed rollout scores high
    row = rows[0]
    gold = row["reward_model"]["ground_truth"]
    def rollout(answer: str) -> str:
        return f"<think>look it up</think><search>the question</search><think>found it</think><answer>{answer}</answer>"

    good = compute_score(row["data_source"], rollout(gold), gold, row["extra_info"], judge="rules")
    bad = compute_score(row["data_source"], rollout("certainly not this"), gold, row["extra_info"], judge="rules")
    assert set(good) >= {"score", "judge", "format", "ndcg"}  # VRAG-RL's components: the reward the recipe names
    assert (good["judge"], bad["judge"], good["format"]) == (1.0, 0.0, 1.0) and good["score"] > bad["score"]

    from vrag_data.report.build import build_report

    rep = build_report(Workspace(str(ws)), res.run_id, html=True)
    import duckdb

    con = duckdb.connect(rep.db_path, read_only=True)
    try:
        recipes = {r[0] for r in con.execute("SELECT DISTINCT recipe FROM trajectories").fetchall()}
        # the export went to a folder outside the workspace (--out) and is still counted
        n_exports = con.execute("SELECT count(*) FROM exports WHERE run_id = ?", [res.run_id]).fetchone()[0]
    finally:
        con.close()
    html = Path(rep.html_path).read_text()
    assert "toy_crop" in recipes and "toy_crop" in html and "oracle policy" in html  # the oracle is labelled
    assert n_exports == 1


def test_run_id_follows_the_recipe_description(toy):
    cfg = oracle_cfg()
    base = default_run_id(toy, cfg)
    assert base == default_run_id(resolve_recipe("toy_crop", cfg), cfg)  # a name resolves to the same recipe
    edited = dataclasses.replace(toy, system_prompt=toy.system_prompt + " Be brief.")
    assert default_run_id(edited, cfg) != base  # an edited prompt is a new run, never a resume into the old one
    opts = oracle_cfg(recipe_options={"toy_crop": {"top_k": 2}})
    assert default_run_id(resolve_recipe(toy, opts), opts) != base
    # filters and export hints act after synthesis: they do not change the run
    assert default_run_id(dataclasses.replace(toy, filters=()), cfg) == base


@pytest.mark.slow
def test_newest_record_wins_and_stale_verdicts_stop_the_export(toy, ws, tmp_path):
    cfg = oracle_cfg()
    synth(str(ws), cfg, toy, run_id="toy-resume", limit=1, progress=False)
    run = RunDir(str(ws / "runs" / "toy-resume"))
    judge_and_filter(str(ws), "toy-resume", cfg, toy)
    assert run.verdict_state()[0] == "fresh"
    # synth resumed with more tasks after the filter: the verdicts no longer cover every episode
    more = synth(str(ws), cfg, toy, run_id="toy-resume", progress=False)
    assert more.stats["finished"] == more.n_tasks - 1
    assert run.verdict_state()[0] == "stale"
    with pytest.raises(VragError, match="vrag-data filter"):
        export_run(Workspace(str(ws)), "toy-resume", ["verl"], out_dir=tmp_path / "stale")
    # an episode re-run after an error: the error record, then the answered one; readers see only the newest
    (first,) = [t for t in run.episodes() if t.sample == 0][:1]
    err = first.model_copy(update={"traj_id": first.traj_id + "-err", "status": "error", "turns": [], "prompt": []})
    n = len(run.part_files())
    write_records(str(Path(run.path) / "trajectories" / f"part-{n:06d}.parquet"), [err], Trajectory)
    write_records(str(Path(run.path) / "trajectories" / f"part-{n + 1:06d}.parquet"), [first], Trajectory)
    episodes = list(run.episodes())
    assert len(episodes) == more.n_tasks and [t.traj_id for t in episodes].count(first.traj_id) == 1
    assert all(t.traj_id != err.traj_id for t in episodes)
    judge_and_filter(str(ws), "toy-resume", cfg, toy)
    s = export_run(Workspace(str(ws)), "toy-resume", ["verl", "llamafactory"], out_dir=tmp_path / "fresh")
    assert s.n_trajectories == more.n_tasks + len(list(run.augmented()))
    assert not s.skipped  # no record without an assistant turn, no RL row with an empty prompt


LIBRARY = REPO / "vrag_data"
ALLOWED = {LIBRARY / "rewards", LIBRARY / "cli"}


def test_the_library_names_no_recipe_and_never_imports_pipelines():
    names = set(recipe_names())
    literal = re.compile(r"""["']([a-z0-9_]+)["']""")
    offenders = []
    for path in sorted(LIBRARY.rglob("*.py")):
        if any(a in path.parents for a in ALLOWED):
            continue
        text = path.read_text()
        if re.search(r"^\s*(from|import)\s+pipelines\b", text, re.M) or "import_module(\"pipelines" in text:
            offenders.append(f"{path.relative_to(REPO)}: imports pipelines")
        for m in literal.finditer(text):
            if m.group(1) in names:
                line = text.count("\n", 0, m.start()) + 1
                offenders.append(f"{path.relative_to(REPO)}:{line}: {m.group(0)}")
        if re.search(r"from\s+vrag_data\.cli\b|import\s+vrag_data\.cli\b", text) and "train" in path.parts:
            offenders.append(f"{path.relative_to(REPO)}: the trainer imports the CLI")
    assert not offenders, "\n".join(offenders)


def test_recipe_module_registration_is_explicit():
    # a recipe under a taken name is refused unless replacing on purpose
    with pytest.raises(ValueError, match="already registered"):
        register(dataclasses.replace(TOY, name="vrag_rl"))
    json.dumps(TOY.describe())  # the description is plain data (it goes into the manifest)
