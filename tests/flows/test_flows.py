"""The Prefect flows against a temporary Prefect server (`prefect_test_harness`), on one small workspace:
the synth flow end to end; a re-run that skips every finished shard (Cached states, no file rewritten); a
deleted output that makes only its shard run again; a shard that keeps failing, is retried, reported, and
does not cost the other recipes their outputs; and the same flow with its shards on a local Ray instance."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.support.roles import ORACLE_ROLES
from vrag_data.config import load_config
from vrag_data.recipe import resolve_recipe

prefect = pytest.importorskip("prefect")
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from flows.flows import ShardsFailed, synth  # noqa: E402

# a module-wide fixture ingests, serves or deploys for minutes: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness():
    with prefect_test_harness(server_startup_timeout=300):
        yield


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("flows") / "ws"


def write_config(path: Path, ws: Path, recipes: list[str], **runner) -> Path:
    cfg = {
        "workspace": str(ws),
        "ingest": {"sample_corpus": 2, "ocr": "off", "workers": 1, "docs_per_shard": 1},
        "synth": {"recipes": recipes, "tasks_per_shard": 8},
        "roles": {**ORACLE_ROLES, "student": {"kind": "extractive"}},
        "runner": {"max_concurrency": 2, "retries": 1, "retry_delay_s": 0, **runner},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def api(path: str, body: dict) -> list[dict]:
    """The Prefect REST API of the harness server."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    res = httpx.post(f"{PREFECT_API_URL.value()}/{path}", json=body, timeout=30)
    res.raise_for_status()
    return res.json()


def shards(ws: Path) -> list[dict]:
    return json.loads((ws / "pipeline.json").read_text())["shards"]


def by_stage(rows: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in rows:
        out.setdefault(r["stage"], set()).add(r["state"])
    return out


def files_with_mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.mark.heavy
def test_synth_flow_end_to_end_then_rerun_skips_finished_shards(harness, ws, tmp_path):
    cfg_path = write_config(tmp_path / "tiny.yaml", ws, ["vrag_rl", "evisrag"])
    summary = synth(str(cfg_path))

    from vrag_data.synth.run import default_run_id
    from vrag_data.tasks import load_tasks
    from vrag_data.store import Workspace

    cfg = load_config(cfg_path)
    n_tasks = len(load_tasks(Workspace(str(ws))))
    assert n_tasks > 8  # more than one task shard per recipe
    for recipe in ("vrag_rl", "evisrag"):
        run_id = default_run_id(resolve_recipe(recipe, cfg), cfg)
        assert summary["runs"][recipe] == run_id
        out = ws / "exports" / run_id
        assert list((out / "hf" / "data").glob("sft-*.parquet")) and (out / "hf" / "README.md").is_file()
        assert (out / "llamafactory" / "dataset_info.json").is_file()
        assert list((out / "verl").rglob("*.parquet"))
        manifest = json.loads((ws / "runs" / run_id / "manifest.json").read_text())
        assert manifest["status"] == "finished" and manifest["n_tasks"] == n_tasks
        assert manifest["stats"]["finished"] == n_tasks  # summed over the task shards
    assert (ws / "report.duckdb").is_file() and (ws / "report.html").is_file()
    first = shards(ws)
    synth_rows = [r for r in first if r["stage"] == "synth"]
    assert len(synth_rows) == 2 * -(-n_tasks // 8) and all(r["state"] == "Completed" for r in synth_rows)
    assert by_stage(first)["ingest"] == {"Completed"} and len([r for r in first if r["stage"] == "ingest"]) == 2
    assert "| vrag_rl |" in summary["markdown"] and str(ws / "report.html") in summary["markdown"]

    # the artifact is on the server
    arts = api("artifacts/filter", {"artifacts": {"key": {"any_": ["synth-summary"]}}, "sort": "CREATED_DESC", "limit": 5})
    assert arts and "| evisrag |" in arts[0]["data"] and str(ws / "report.duckdb") in arts[0]["data"]

    before = files_with_mtimes(ws / "runs") | files_with_mtimes(ws / "corpus") | files_with_mtimes(ws / "exports")
    synth(str(cfg_path))
    states = by_stage(shards(ws))
    for stage in ("sample", "ingest", "index", "tasks", "synth", "filter", "export"):
        assert states[stage] == {"Cached"}, (stage, states[stage])
    after = files_with_mtimes(ws / "runs") | files_with_mtimes(ws / "corpus") | files_with_mtimes(ws / "exports")
    assert after == before  # nothing was rewritten

    # outputs deleted behind the cache's back: only that shard runs again
    gone = ws / "exports" / default_run_id(resolve_recipe("evisrag", cfg), cfg)
    import shutil

    shutil.rmtree(gone)
    synth(str(cfg_path))
    rows = shards(ws)
    exports = {r["label"]: r["state"] for r in rows if r["stage"] == "export"}
    assert exports == {"evisrag": "Completed", "vrag_rl": "Cached"}
    assert by_stage(rows)["synth"] == {"Cached"}
    assert (gone / "llamafactory" / "dataset_info.json").is_file()


def test_failing_shard_is_retried_reported_and_the_others_are_kept(harness, ws, tmp_path):
    from vrag_data.synth.ledger import RunLock
    from vrag_data.synth.run import default_run_id

    cfg_path = write_config(tmp_path / "three.yaml", ws, ["vrag_rl", "evisrag", "visor"])
    visor_run = ws / "runs" / default_run_id(resolve_recipe("visor", load_config(cfg_path)), load_config(cfg_path))
    with RunLock(visor_run):  # another writer holds the visor run: every visor shard fails, every time
        state = synth(str(cfg_path), return_state=True)
    assert state.is_failed()
    with pytest.raises(ShardsFailed, match="synth visor shard"):
        state.result()
    rows = shards(ws)
    failed = [r for r in rows if r["failed"]]
    assert failed and {r["stage"] for r in failed} == {"synth"} and all(r["label"].startswith("visor ") for r in failed)
    assert all("another process is writing this run" in r["message"] for r in failed)
    assert {r["label"] for r in rows if r["stage"] == "export"} == {"vrag_rl", "evisrag"}  # no export of a failed run
    for recipe in ("vrag_rl", "evisrag"):
        assert (ws / "exports" / default_run_id(resolve_recipe(recipe, load_config(cfg_path)), load_config(cfg_path)) / "verl").is_dir()
    md = json.loads((ws / "pipeline.json").read_text())
    assert md["shards"] == rows

    runs = api("task_runs/filter", {"task_runs": {"name": {"like_": "synth-shard"}, "state": {"type": {"any_": ["FAILED"]}}},
                                    "limit": 200})
    assert len(runs) == len(failed) and all(t["run_count"] == 2 for t in runs)  # retries: 1 -> two attempts each

    # adding a recipe did not invalidate the finished ones; the lock is gone: a re-run finishes visor only
    assert {r["state"] for r in rows if r["stage"] == "synth" and not r["label"].startswith("visor ")} == {"Cached"}
    synth(str(cfg_path))
    rows = shards(ws)
    assert not [r for r in rows if r["failed"]]
    visor = {r["state"] for r in rows if r["stage"] == "synth" and r["label"].startswith("visor ")}
    others = {r["state"] for r in rows if r["stage"] == "synth" and not r["label"].startswith("visor ")}
    assert visor == {"Completed"} and others == {"Cached"}


def test_train_flow_on_an_export(harness, ws, tmp_path):
    pytest.importorskip("torch")
    from flows.flows import train
    from vrag_data.synth.run import default_run_id

    cfg = load_config(write_config(tmp_path / "t.yaml", ws, ["evisrag"]))
    data = ws / "exports" / default_run_id(resolve_recipe("evisrag", cfg), cfg) / "llamafactory"
    repo = Path(__file__).resolve().parents[2]
    res = train(str(repo / "configs" / "train" / "tiny-sft.yaml"), mode="sft", data=str(data), output=str(tmp_path / "out"), max_steps=2)
    assert res["global_step"] == 2 and res["examples"] > 0 and res["last_loss"] is not None
    arts = api("artifacts/filter", {"artifacts": {"key": {"any_": ["train-sft-summary"]}}, "sort": "CREATED_DESC", "limit": 1})
    assert arts and "global_step | 2" in arts[0]["data"]


@pytest.mark.soak
@pytest.mark.heavy
def test_synth_flow_on_a_local_ray_instance(harness, ws, tmp_path):
    pytest.importorskip("prefect_ray")
    cfg_path = write_config(tmp_path / "ray.yaml", ws, ["unidoc_rl"], kind="ray")
    summary = synth(str(cfg_path))
    assert summary["runner"] == "a local Ray instance (loopback)"
    rows = [r for r in shards(ws) if r["stage"] == "synth"]
    assert rows and all(r["state"] == "Completed" for r in rows)
    pids = {r["result"]["worker"].rsplit(":", 1)[1] for r in rows}
    assert str(os.getpid()) not in pids  # the shards ran in Ray worker processes, not in this one
    assert (Path(summary["exports"]["unidoc_rl"]["dir"]) / "llamafactory" / "dataset_info.json").is_file()
    import ray

    assert not ray.is_initialized()  # the flow's private Ray instance was shut down


def test_the_offline_question_writer_runs_only_when_asked_and_is_recorded(harness, tmp_path):
    """The tasks stage generates questions with the offline writer when the config says so (and the flow's
    parameters `recipe`, `questions`, `samples` replace the config's): each task and the manifest name it. The imported
    QA file goes in under `tasks.split` (a benchmark's test set), the generated questions under their own split."""
    ws = tmp_path / "ws"
    cfg = tmp_path / "offline.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws), "ingest": {"sample_corpus": 1, "ocr": "off", "workers": 1},
        "tasks": {"split": "test", "generate": {"writer": "offline", "min_share": 0.5}},
        "synth": {"recipes": ["visor"]},
        "roles": {"policy": {"kind": "oracle"}, "judge": {"kind": "rules"}, "student": {"kind": "extractive"}},
        "runner": {"max_concurrency": 2, "retries": 0},
    }))
    summary = synth(str(cfg), recipe="evisrag", questions=6, samples=1)
    from vrag_data.store import Workspace
    from vrag_data.tasks import load_tasks

    generated = [t for t in load_tasks(Workspace(str(ws))) if t.benchmark == "generated"]
    assert generated and {t.extra["writer"] for t in generated} == {"oracle"}
    imported = [t for t in load_tasks(Workspace(str(ws))) if t.benchmark != "generated"]
    assert imported and {t.split for t in imported} == {"test"} and {t.split for t in generated} == {"train"}
    manifest = json.loads((ws / "tasks" / "generate_manifest.json").read_text())
    assert manifest["offline_writer"] is True and manifest["writer"] == "oracle"
    # one document gives no cross-document question: that kind is named under its share (the CLI exits 3 for it)
    assert any(k.startswith("cross_doc kept 0 of ") for k in manifest["short_kinds"]), manifest["short_kinds"]
    assert summary["generated"]["writer"] == "oracle" and set(summary["runs"]) == {"evisrag"}
    assert any(r["stage"] == "tasks" and r["label"] == "generate (oracle writer)" for r in shards(ws))


@pytest.mark.heavy
def test_a_bad_file_among_good_ones_is_named_in_the_runs_logs_and_summary(harness, tmp_path):
    """One PDF that is not a PDF among good ones: the batch goes on without it, and the run says so where a user
    looks: the logs of the flow run they started (what `--watch` follows, not only the inner flow's) and the summary
    (pipeline.json, the artifact)."""
    from vrag_data.sample import make_sample_corpus

    corpus = make_sample_corpus(tmp_path / "docs", docs=1, seed=0)
    (tmp_path / "docs" / "notes.pdf").write_text("meeting notes, not a PDF\n")
    ws = tmp_path / "ws"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({
        "workspace": str(ws), "ingest": {"paths": [str(tmp_path / "docs")], "ocr": "off", "workers": 1},
        "tasks": {"file": str(corpus.qa_path)}, "synth": {"recipes": ["evisrag"]},
        "roles": {**ORACLE_ROLES, "student": {"kind": "extractive"}}, "runner": {"max_concurrency": 2, "retries": 0},
    }))
    state = synth(str(cfg), return_state=True)
    assert state.is_completed()
    notes = json.loads((ws / "pipeline.json").read_text())["notes"]
    skipped = [n for n in notes if n.startswith("ingest: skipped notes.pdf: not a PDF")]
    assert len(skipped) == 1, notes
    root = api("flow_runs/filter", {"flow_runs": {"parent_task_run_id": {"is_null_": True}},
                                    "sort": "START_TIME_DESC", "limit": 1})[0]
    logs = api("logs/filter", {"logs": {"flow_run_id": {"any_": [root["id"]]}}, "limit": 200})
    assert any(r["message"].startswith("ingest: skipped notes.pdf: not a PDF") for r in logs), [r["message"] for r in logs][:30]
