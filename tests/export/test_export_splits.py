"""A task imported with `--split test` never reaches a training file, in any format; the HF card labels each split;
one file per distinct page image whatever the record that shows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.export import export_run  # noqa: E402
from vrag_data.export.images import ImageStore  # noqa: E402
from vrag_data.schema.geometry_types import Box  # noqa: E402
from vrag_data.schema.records import ImageRef, Task  # noqa: E402
from vrag_data.store import read_records, write_records  # noqa: E402
from tests.support.extras import needs_torch

FORMATS = ["hf", "llamafactory", "verl", "easyr1"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The fixture run with task t2 (trajectories tr2, tr6) moved to the `test` split."""
    root = tmp_path_factory.mktemp("splits")
    ws = build_workspace(root / "ws")
    tasks = [t.model_copy(update={"split": "test"}) if t.task_id == "t2" else t for t in read_records(ws.tasks, Task)]
    write_records(ws.path("tasks", "tasks.parquet"), tasks, Task)
    summary = export_run(ws, "r1", FORMATS, out_dir=root / "out", recipes=run_recipes())
    return root / "out", summary


def _jsonl(folder: Path) -> list[dict]:
    return [json.loads(x) for f in sorted(folder.glob("*.jsonl")) for x in f.read_text().splitlines()]


def test_llamafactory_holds_no_test_task(exported):
    out, summary = exported
    ids = [r["id"] for f in sorted((out / "llamafactory").rglob("part-*.json")) for r in json.loads(f.read_text())]
    assert ids == ["tr1"]  # tr2 and tr6 answer t2, a test task
    assert summary.counts["llamafactory"] == {"vrag_rl": 1}


def test_hf_sft_test_split_apart(exported, monkeypatch):
    out, summary = exported
    monkeypatch.chdir(out)
    train = datasets.load_dataset("hf", "sft", split="train")
    test = datasets.load_dataset("hf", "sft", split="test")
    assert train["traj_id"] == ["tr1"] and sorted(test["traj_id"]) == ["tr2", "tr6"]
    assert summary.stats["splits"]["hf"]["sft"] == {"train": 1, "test": 2}
    header = (out / "hf" / "README.md").read_text().split("---")[1]
    assert "- split: test" in header and header.count("- split: train") == 2  # sft and rl each have a train split


def test_rl_formats_hold_no_test_task_in_train(exported, monkeypatch):
    out, summary = exported
    verl_train = [r["extra_info"]["task_id"] for f in sorted((out / "verl").glob("train-*.parquet")) for r in pq.read_table(f).to_pylist()]
    verl_test = [r["extra_info"]["task_id"] for f in sorted((out / "verl").glob("test-*.parquet")) for r in pq.read_table(f).to_pylist()]
    # t4's row has no image to miss (its SFT record does); t2's vrag_rl and evisrag rows are test rows
    assert sorted(verl_train) == ["t1", "t4"] and verl_test == ["t2", "t2"]
    assert [r["task_id"] for r in _jsonl(out / "easyr1" / "train")] == ["t1"]  # t4's gold page image is missing
    assert {r["task_id"] for r in _jsonl(out / "easyr1" / "test")} == {"t2"}
    monkeypatch.chdir(out)
    assert sorted(datasets.load_dataset("hf", "rl", split="train")["id"]) == ["t1:vrag_rl", "t4:vrag_rl"]
    assert sorted(datasets.load_dataset("hf", "rl", split="test")["id"]) == ["t2:evisrag", "t2:vrag_rl"]
    card = (out / "README.md").read_text()
    assert "| hf/rl | test | 2 |" in card and "| verl/rl | train | 2 |" in card


def test_a_whole_page_is_one_file_whatever_the_crop_setting(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    store = ImageStore(ws, tmp_path / "out", "qwen2.5-vl")
    page = ImageRef(page_id="docA_2")
    assert store.materialise(page, 401408) == store.materialise(page, 401408, crop_min_pixels=200704)
    crop = ImageRef(page_id="docA_2", box=Box.from_norm((100, 200, 500, 600), 1000, 1400))
    assert store.materialise(crop, 401408) != store.materialise(crop, 401408, crop_min_pixels=200704)  # crops differ
    assert store.written == 3 and len(list((tmp_path / "out" / "images").glob("*.jpg"))) == 3


def test_easyr1_rows_reuse_the_rows_images(exported):
    out, _ = exported
    folder = out / "hf" / "data" / "images"  # the export's one image folder (hf's image-folder layout is selected)
    names = {p.name for p in folder.glob("*.jpg")}
    rows = _jsonl(out / "easyr1" / "test")
    assert all(p.startswith("hf/data/images/") and Path(p).name in names for r in rows for p in r["image"])
    assert len(names) == len({(folder / n).read_bytes() for n in names})  # no two files hold the same bytes


@needs_torch
def test_the_bundled_trainer_never_reads_a_test_task(exported, tmp_path):
    """`vrag-data train sft --data` on the export, its HF folder or an HF shard file, and `train rl --data` on the
    export: only the train split's records and rows (t2 is a test task; its records are in the export, apart)."""
    from vrag_data.errors import VragError
    from vrag_data.train.data import load_sft_examples
    from vrag_data.train.rl_env import _task_ids_from_export

    out, _ = exported
    for data in (out, out / "hf"):
        examples, errors = load_sft_examples(data)
        assert not errors and len(examples) == 1  # tr1 only
    test_shard = next((out / "hf" / "data").glob("sft-test-*.parquet"))
    with pytest.raises(VragError, match="test or validation tasks"):
        load_sft_examples(test_shard)
    only_test = tmp_path / "hf" / "data"
    only_test.mkdir(parents=True)
    (only_test / test_shard.name).write_bytes(test_shard.read_bytes())
    with pytest.raises(VragError, match="no train split"):
        load_sft_examples(tmp_path / "hf")
    assert sorted(set(_task_ids_from_export(str(out)))) == ["t1", "t4"]
    with pytest.raises(VragError, match="test or validation tasks"):
        _task_ids_from_export(str(next((out / "verl").glob("test-*.parquet"))))
