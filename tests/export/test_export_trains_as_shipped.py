"""Shipped trainer configs resolve from the export folder and name every key a user must set; an export with nothing
to write stops; an empty training split never yields a config naming missing files. (The trainers' own parsers read
these configs in consumers/: `make test-consumers`.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.export import export_run  # noqa: E402
from vrag_data.export.easyr1 import EASYR1_USER_KEYS  # noqa: E402
from vrag_data.export.llamafactory import DS_CONFIG, LF_USER_KEYS  # noqa: E402
from vrag_data.export.verl import VERL_USER_KEYS, VRAGRL_USER_KEYS  # noqa: E402
from vrag_data.schema.records import Task  # noqa: E402
from vrag_data.store import read_records, write_records  # noqa: E402

FORMATS = ["hf", "llamafactory", "verl", "easyr1"]


def header(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if line.startswith("#"))


def test_shipped_configs_resolve_and_name_the_users_keys(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    out = tmp_path / "o"
    export_run(ws, "r1", formats=FORMATS, out_dir=out, recipes=run_recipes())
    # LLaMA-Factory: every path it names is in the export, the DeepSpeed file included
    for f in (out / "llamafactory").glob("sft_*.yaml"):
        cfg = yaml.safe_load(f.read_text())
        assert cfg["deepspeed"] == f"llamafactory/{DS_CONFIG}"
        assert json.loads((out / cfg["deepspeed"]).read_text())["zero_optimization"]["stage"] == 3
        assert (out / cfg["dataset_dir"] / "dataset_info.json").is_file() and (out / cfg["media_dir"]).is_dir()
        assert all(k in header(f) for k in LF_USER_KEYS), f.name
    # verl >= 0.9 and VRAG-RL's fork: Hydra configs over the trainer's own ppo_trainer
    for name, keys, reward in (("config.yaml", VERL_USER_KEYS, ("reward", "custom_reward_function")),
                               ("vragrl.yaml", VRAGRL_USER_KEYS, ("custom_reward_function",))):
        f = out / "verl" / name
        cfg = yaml.safe_load(f.read_text())
        assert cfg["defaults"] == ["ppo_trainer", "_self_"]
        assert all((out / p).is_file() for p in [*cfg["data"]["train_files"], *cfg["data"]["val_files"]])
        fn = cfg
        for k in reward:
            fn = fn[k]
        assert (out / fn["path"]).is_file() and fn["name"] == "compute_score"
        assert all(k in header(f) for k in keys), name
    assert yaml.safe_load((out / "verl" / "vragrl.yaml").read_text())["reward_model"] == {"reward_manager": "rm"}
    # EasyR1: folders with rows, the reward file, the keys
    f = out / "easyr1" / "data_config.yaml"
    cfg = yaml.safe_load(f.read_text())
    for folder in (cfg["data"]["train_files"], cfg["data"]["val_files"]):
        assert list((out / folder).glob("*.jsonl")), folder
    assert (out / cfg["worker"]["reward"]["reward_function"].split(":")[0]).is_file()
    assert all(k in header(f) for k in EASYR1_USER_KEYS)
    # the reward bundle: standard library only, nothing to install
    assert not (out / "reward" / "requirements.txt").exists() and (out / "reward" / "vragrl_reward.py").is_file()


def test_no_training_rows_means_no_config_naming_missing_files(tmp_path):
    """Every task imported as `test`: the RL rows go to the test split and no SFT record reaches LLaMA-Factory, so no
    format has training rows: no verl/EasyR1 config and no LLaMA-Factory yaml is written (EasyR1 would look a missing
    `easyr1/train` up on the Hub), the export says why, and what it does write names only files that exist."""
    ws = build_workspace(tmp_path / "ws")
    tasks = [t.model_copy(update={"split": "test"}) for t in read_records(ws.tasks, Task)]
    write_records(ws.path("tasks", "tasks.parquet"), tasks, Task)
    out = tmp_path / "o"
    s = export_run(ws, "r1", formats=FORMATS, out_dir=out, recipes=run_recipes())
    assert s.counts["verl"].get("train", 0) == 0 and s.counts["verl"].get("test", 0) > 0
    assert not (out / "verl" / "config.yaml").exists() and not (out / "verl" / "vragrl.yaml").exists()
    assert not (out / "easyr1" / "data_config.yaml").exists() and not (out / "easyr1" / "train").exists()
    assert not list((out / "llamafactory").glob("*.yaml"))
    for fmt in ("verl", "easyr1", "llamafactory"):
        assert any(w.startswith(f"{fmt}: no training") for w in s.warnings), (fmt, s.warnings)
    # a re-export once tasks are back in train writes the configs again (and a stale one never survives)
    write_records(ws.path("tasks", "tasks.parquet"), [t.model_copy(update={"split": "train"}) for t in tasks], Task)
    export_run(ws, "r1", formats=FORMATS, out_dir=out, recipes=run_recipes())
    assert (out / "verl" / "config.yaml").is_file() and (out / "easyr1" / "data_config.yaml").is_file()


def test_export_with_nothing_kept_stops_and_writes_nothing(tmp_path):
    import pytest

    from vrag_data.export.runner import NothingToExport
    from vrag_data.schema.records import Verdict
    from vrag_data.store import Workspace

    ws = build_workspace(tmp_path / "ws")
    write_records(Workspace(str(tmp_path / "ws")).path("runs", "r1", "verdicts", "v.parquet"),
                  [Verdict(run_id="r1", traj_id=f"tr{i}", task_id="t", filter="x", passed=False) for i in range(1, 8)], Verdict)
    with pytest.raises(NothingToExport, match=r"nothing to export \(0 of 7 trajectories kept"):
        export_run(ws, "r1", formats=FORMATS, out_dir=tmp_path / "o", recipes=run_recipes())
    assert not (tmp_path / "o").exists()
    # an existing export of the run is not left half-replaced: it is emptied, with the reason in the error
    export_run(build_workspace(tmp_path / "ws2"), "r1", formats=FORMATS, out_dir=tmp_path / "o2", recipes=run_recipes())
    with pytest.raises(NothingToExport):
        export_run(ws, "r1", formats=FORMATS, out_dir=tmp_path / "o2", recipes=run_recipes())
    assert not [p for p in (tmp_path / "o2").iterdir() if p.name != ".export.lock"] if (tmp_path / "o2").exists() else True
