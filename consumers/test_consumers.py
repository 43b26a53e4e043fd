"""Conformance: every recipe's export, moved to a new folder with its workspace deleted, read by each consumer's own
code in that consumer's own environment (`make test-consumers`; environments from consumers/envs.py).

What is not the consumer's code, and why, is said in each check script: the model is a weightless tiny tokenizer +
Qwen2-VL processor folder (no weights can be fetched here); torchaudio is an import-only stub for LLaMA-Factory (no
registry wheel of it imports beside the CPU torch); the model judge is replaced by the rule scorers, set explicitly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

HERE = Path(__file__).resolve().parent
ENVS = Path(os.environ.get("VRAG_CONSUMERS_DIR", HERE.parent / ".consumers")).resolve()
sys.path.insert(0, str(HERE.parent))

from consumers import splits  # noqa: E402
from consumers.build_exports import VRAGRL, build  # noqa: E402
from consumers.envs import ensure  # noqa: E402
from consumers.make_tiny_model import make  # noqa: E402
from vrag_data.recipe import recipe_names  # noqa: E402

RECIPES = tuple(recipe_names())


def source_checkout(var: str, name: str) -> str:
    """A consumer that is not on the package registry: its checkout named by `var`, else `<consumers dir>/src/<name>`."""
    path = os.environ.get(var) or str(ENVS / "src" / name)
    return path if Path(path).is_dir() else ""


EASYR1_SRC = source_checkout("EASYR1_SRC", "EasyR1")  # github.com/hiyouga/EasyR1
VRAGRL_SRC = source_checkout("VRAGRL_SRC", "VRAG")  # github.com/Alibaba-NLP/VRAG (VRAG-RL/ holds the verl fork)
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="session")
def exports(tmp_path_factory, worker_id) -> Path:
    """Built once per session: with `-n N` the first worker builds it under a lock in the folder all workers share,
    the others wait for it and read the same files."""
    if worker_id == "master":
        out = tmp_path_factory.mktemp("moved") / "exports"
        assert build(out) == list(RECIPES)
        return out
    shared = tmp_path_factory.getbasetemp().parent
    out, done = shared / "moved" / "exports", shared / "moved" / "built"
    with FileLock(str(shared / "moved.lock")):
        if not done.is_file():
            assert build(out) == list(RECIPES)
            done.write_text(" ".join(RECIPES))
    return out


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    return make(tmp_path_factory.mktemp("tiny-model"))


def run_check(env: str, script: str, root: Path, tiny: Path, extra_env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> dict:
    py = ensure(ENVS, env)
    held = next((str(p / splits.SPLITS_FILE) for p in root.parents if (p / splits.SPLITS_FILE).is_file()), "")
    proc = subprocess.run([str(py), str(HERE / script), str(root), str(tiny), *args], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "HF_HUB_OFFLINE": "1", splits.ENV: held, **(extra_env or {})},
                          timeout=1800)
    assert proc.returncode == 0, f"{script} on {root.name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def no_test_task_trained(found: dict, where: str) -> None:
    """A consumer's report of the tasks its training items ask (consumers/splits.py): it found a task in every item,
    and none of them is a task imported with `--split test`."""
    assert found["tasks"] and found["unmatched_items"] == 0, f"{where}: the questions were not found in what it read: {found}"
    assert found["test_tasks"] == [], f"{where} trains on test tasks {found['test_tasks']}"


@pytest.fixture(scope="session")
def test_tasks(exports) -> set[str]:
    return {tid for tid, t in splits.load(exports / splits.SPLITS_FILE).items() if t["split"] == "test"}


@pytest.mark.parametrize("recipe", RECIPES)
def test_llamafactory_sft_pipeline(exports, tiny, recipe):
    got = run_check("llamafactory", "check_llamafactory.py", exports / recipe, tiny)
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["records"] == summary["counts"]["llamafactory"][recipe] > 0
    assert got["deepspeed"] == "llamafactory/ds_z3_config.json"  # shipped in the export, read by the check
    no_test_task_trained(got["splits"], f"LLaMA-Factory on {recipe}")


@pytest.mark.parametrize("recipe", RECIPES)
def test_verl_dataset_and_reward(exports, tiny, recipe):
    """verl's CLI composes the shipped verl/config.yaml, its dataset reads every row, and its reward loader's function
    scores a right rollout above a wrong one on every row (consumers/check_verl.py)."""
    got = run_check("verl", "check_verl.py", exports / recipe, tiny)
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["rows"] == sum(summary["counts"]["verl"].values()) and summary["counts"]["verl"]["train"] > 0
    assert got["rewards_checked"] == got["rows"]
    no_test_task_trained(got["splits"], f"verl on {recipe}")


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.skipif(not VRAGRL_SRC, reason="VRAG-RL's fork is not on the package registry: set VRAGRL_SRC to a checkout "
                    "of Alibaba-NLP/VRAG (or put it in <consumers dir>/src/VRAG)")
def test_vragrl_fork_reward_and_config(exports, tiny, recipe):
    """VRAG-RL's fork: its CLI composes verl/vragrl.yaml, its reward loader loads reward/vragrl_reward.py and its
    reward manager (rm.py, with a judge stand-in) scores a right rollout above a wrong one on every row, in training
    and in validation mode (consumers/check_vragrl.py), on the export made for it (`--for vragrl`); the fork's own
    dataset reads every row, EVisRAG's with its embedded page images."""
    _fork_runs(recipe)
    got = run_check("verl", "check_vragrl.py", exports / VRAGRL / recipe, tiny, {"VRAGRL_SRC": VRAGRL_SRC},
                    args=(str(exports / recipe),))
    summary = json.loads((exports / VRAGRL / recipe / "summary.json").read_text())
    assert got["rows"] == got["rewards_checked"] == sum(summary["counts"]["verl"].values()) > 0
    assert all(m["right_mean"] > m["wrong_mean"] for m in got["modes"].values()) and got["judge_requests"] > 0
    assert got["dataset_items"] == got["rows"] and (got["dataset_images"] > 0) == (recipe == "evisrag"), got
    no_test_task_trained(got["splits"], f"VRAG-RL's fork on {recipe}")


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.skipif(not EASYR1_SRC, reason="EasyR1 is not on the package registry: set EASYR1_SRC to a checkout "
                    "(or put it in <consumers dir>/src/EasyR1)")
def test_easyr1_dataset_and_reward(exports, tiny, recipe):
    """EasyR1's own main() parses easyr1/data_config.yaml with the keys its header names (the folders it names exist),
    its dataset reads every row and its reward manager, in an environment without pydantic, scores a right rollout
    above a wrong one on every row (consumers/check_easyr1.py)."""
    got = run_check("easyr1", "check_easyr1.py", exports / recipe, tiny, {"EASYR1_SRC": EASYR1_SRC})
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["rows"] == summary["counts"]["easyr1"]["train"] > 0
    assert got["rewards_checked"] == sum(summary["counts"]["easyr1"].values())
    no_test_task_trained(got["splits"], f"EasyR1 on {recipe}")


def row_text(row: dict) -> str:
    """The chat text of an HF row: `messages` of an SFT row, `prompt` of an RL row."""
    return "\n".join(str(m["content"]) for m in row.get("messages") or row.get("prompt") or [])


@pytest.mark.parametrize("recipe", RECIPES)
def test_datasets_load_each_config(exports, test_tasks, recipe, monkeypatch):
    """`datasets.load_dataset` on the moved folder, one config per record type and split, in a clean environment's
    sense: the main environment's `datasets`, with the workspace gone, from the export folder (images are its files).
    The `train` split of each config asks no test task; the test tasks are under `test`, as the card's table says.
    The Hub's own card parser reads the licence from the card's header: `other` for an export made without
    `--license`, and the card says it is not fit to publish."""
    import datasets
    from huggingface_hub import DatasetCard

    root = exports / recipe
    monkeypatch.chdir(root)
    summary = json.loads((root / "summary.json").read_text())
    held = splits.load(exports / splits.SPLITS_FILE)
    card = (root / "README.md").read_text()
    hub_card = DatasetCard.load(root / "hf" / "README.md")
    assert hub_card.data.license == "other" and "Not fit to publish" in hub_card.text
    assert sorted(c["config_name"] for c in hub_card.data.configs) == ["rl", "sft"]
    for config in ("sft", "rl"):
        counts = summary["stats"]["splits"]["hf"][config]
        assert sum(counts.values()) == summary["counts"]["hf"][config]
        ds = datasets.load_dataset("hf", config, split="train")
        assert len(ds) == counts["train"]
        row = next((r for r in ds if r["images"]), None)
        if row is not None:
            assert all(im.size[0] > 0 for im in row["images"])
        no_test_task_trained(splits.report([splits.tasks_in(row_text(r), held) for r in ds], held),
                             f"datasets' {config}/train on {recipe}")
        test = datasets.load_dataset("hf", config, split="test")
        in_test = set().union(*(splits.tasks_in(row_text(r), held) for r in test))
        assert test and in_test <= test_tasks, (recipe, config, in_test - test_tasks)
        assert f"| hf/{config} | test | {len(test)} |" in card


BARE_PROBE = r"""
import importlib.util, json, os, sys
cases = json.load(open(sys.argv[1]))
def load(name):
    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join("reward", name))
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
verl, fork, easyr1 = load("compute_score.py"), load("vragrl_reward.py"), load("easyr1_reward.py")
out = []
for c in cases:
    row = {}
    for side in ("right", "wrong"):
        if c["kind"] == "verl":
            row[side] = {"verl": verl.compute_score(c["data_source"], c[side], c["ground_truth"], c["extra_info"])["score"],
                         "fork": fork.compute_score(c["data_source"], c[side], c["ground_truth"], c["extra_info"])}
        else:
            item = {"response": c[side], "response_length": len(c[side]), "ground_truth": c["ground_truth"]}
            row[side] = {"easyr1": easyr1.compute_score([item])[0]["overall"]}
    out.append(row)
third = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)
               - {"__main__", "vrag_reward", "compute_score", "vragrl_reward", "easyr1_reward"})
print(json.dumps({"scores": out, "third_party": third, "site": "site" in sys.modules}))
"""


@pytest.mark.parametrize("recipe", RECIPES)
def test_reward_bundle_in_a_bare_interpreter(exports, tmp_path, recipe):
    """The shipped reward/ in the reward environment (requirements-reward.txt installs nothing) run as `python -I -S`:
    no site-packages at all, only the standard library and the export's own reward/ folder. Every entry point loads;
    on every verl and EasyR1 row a right rollout outscores a wrong one (verl's dict `score`, EasyR1's `overall`), and
    the fork's entry point returns a float."""
    import pyarrow.parquet as pq

    from consumers.rollouts import right_and_wrong, sft_rollouts

    root = exports / recipe
    assert not (root / "reward" / "requirements.txt").exists()
    assert not [line for line in (HERE / "requirements-reward.txt").read_text().splitlines() if line.split("#")[0].strip()]
    sft = sft_rollouts(root)
    cases = []
    for f in sorted((root / "verl").glob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            gt = row["reward_model"]["ground_truth"]
            right, wrong, _ = right_and_wrong(row["extra_info"]["task_id"], gt, sft)
            cases.append({"kind": "verl", "data_source": row["data_source"], "ground_truth": gt, "right": right,
                          "wrong": wrong, "extra_info": json.loads(json.dumps(row["extra_info"], default=list))})
    for f in sorted((root / "easyr1").rglob("*.jsonl")):
        for row in map(json.loads, f.read_text().splitlines()):
            right, wrong, _ = right_and_wrong(row["task_id"], row["answer"], sft)
            cases.append({"kind": "easyr1", "ground_truth": row["answer"], "right": right, "wrong": wrong})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "probe.py").write_text(BARE_PROBE)
    py = ensure(ENVS, "reward")
    proc = subprocess.run([str(py), "-I", "-S", str(tmp_path / "probe.py"), str(tmp_path / "cases.json")], cwd=root,
                          capture_output=True, text=True, env={"VRAG_REWARD_JUDGE": "rules", "PATH": os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["third_party"] == [] and got["site"] is False
    assert len(got["scores"]) == len(cases) > 0
    for case, s in zip(cases, got["scores"]):
        key = "verl" if case["kind"] == "verl" else "easyr1"
        assert s["right"][key] > s["wrong"][key], (recipe, case["kind"], s)
        if case["kind"] == "verl":
            assert isinstance(s["right"]["fork"], float)


def test_export_with_nothing_to_write_stops(tmp_path):
    """A run whose every trajectory the filter dropped: `vrag-data export` stops with one line and a non-zero exit and
    leaves no folder, instead of writing empty splits and configs naming missing files (EasyR1 would fetch such a
    name from the Hub)."""
    from tests.support.synth_workspace import cli, sample_workspace
    from vrag_data.filters import save_verdicts
    from vrag_data.schema.records import Trajectory, Verdict
    from vrag_data.store import Workspace, read_records

    ws = sample_workspace(tmp_path)
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--run", "none-kept", "-q")
    w = Workspace(str(ws))
    trajs = list(read_records(w.path("runs", "none-kept", "trajectories"), Trajectory))
    assert trajs
    save_verdicts(w.path("runs", "none-kept"), [Verdict(run_id="none-kept", traj_id=t.traj_id, task_id=t.task_id,
                                                        filter="correctness", passed=False) for t in trajs], "v")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "vrag_data.cli.main", "export", "-w", str(ws), "--run", "none-kept",
                           "--out", str(out)], capture_output=True, text=True)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "nothing to export" in line]
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("recipe", RECIPES)
def test_bundled_trainer_reads_the_moved_export(exports, test_tasks, recipe):
    """`vrag-data train sft --data <export>` reads every SFT record of the moved folder, every image found on disk
    (or embedded), nothing skipped, and no test task, from LLaMA-Factory's files or the HF folder alike;
    `train rl --data <export>` takes its tasks from the train rows only."""
    from vrag_data.train.data import load_sft_examples
    from vrag_data.train.rl_env import _task_ids_from_export

    root = exports / recipe
    summary = json.loads((root / "summary.json").read_text())
    examples, skipped = load_sft_examples(root / "llamafactory")
    assert not skipped and len(examples) == summary["counts"]["llamafactory"][recipe] > 0
    for ex in examples:
        assert all(isinstance(im, bytes) or (Path(im).is_file() and root in Path(im).parents) for im in ex.images)
    held = splits.load(exports / splits.SPLITS_FILE)
    for data in (root / "llamafactory", root / "hf"):
        examples, skipped = load_sft_examples(data)
        assert not skipped
        found = [splits.tasks_in("\n".join(text for _, text in ex.messages), held) for ex in examples]
        no_test_task_trained(splits.report(found, held), f"the bundled trainer on {recipe}'s {data.name}")
    rl_tasks = set(_task_ids_from_export(str(root)))
    assert rl_tasks and not rl_tasks & test_tasks


def test_verl_agent_loop(tiny, tmp_path):
    """`train rl --engine verl --dry-run` per recipe on a kept workspace, then verl's own config loader, agent-loop
    construction and reward function in verl's environment (consumers/check_verl_agent_loop.py says what is compared)."""
    import sysconfig

    from tests.support.synth_workspace import cli, sample_workspace

    ws = sample_workspace(tmp_path)
    root = tmp_path / "verl-runs"
    for recipe in RECIPES:
        run = f"oracle-{recipe}"
        # the offline student for the recipes whose filters need one (synth checks it before any episode)
        cli("synth", "-w", ws, "--recipe", recipe, "--policy", "oracle", "--set", "roles.student.kind=extractive", "--run", run, "-q")
        cli("export", "-w", ws, "--run", run, "--out", tmp_path / "exports" / recipe, "--format", "verl")
        sets = ["model.path=" + str(tiny), "model.max_pixels=12544", "rl.judge=rules", "rl.max_turns=2",
                "rl.max_new_tokens=64", "rl.group_size=2", "rl.tasks_per_step=1", "verl.n_gpus_per_node=1",
                "verl.agent_workers=1", "verl.prompt_length=4096", "verl.response_length=4096"]
        if recipe in ("visor", "mmdoc_r1"):  # VISOR's evidence window and MM-Doc-R1's answer phase rewrite the history: last segment, asked for
            sets.append("verl.on_rewrite=last_segment")
        cli("train", "rl", "--config", HERE.parent / "configs" / "train" / "tiny-rl.yaml", "--engine", "verl",
            "--dry-run", "-w", ws, "--data", tmp_path / "exports" / recipe, "-o", root / recipe,
            "--set", f"rl.recipe={recipe}", *[x for s in sets for x in ("--set", s)])
    cli("train", "rl", "--config", HERE.parent / "configs" / "train" / "qwen2.5-vl-7b-rl-vrag-verl.yaml", "--engine", "verl",
        "--dry-run", "-w", ws, "--data", tmp_path / "exports" / "vrag_rl", "-o", root / "shipped",
        "--set", "model.path=" + str(tiny))
    got = run_check("verl", "check_verl_agent_loop.py", root, tiny, {"VRAG_MAIN_SITE": sysconfig.get_paths()["purelib"]})
    assert got.pop("shipped") == "accepted"
    assert sorted(got) == sorted(RECIPES)
    for recipe, r in got.items():
        assert r["tiny"]["trained_turns"] >= 1 and r["tiny"]["server_calls"] >= r["tiny"]["turns"], (recipe, r)
        assert r["scripted"]["same_episode"], (recipe, r)  # canonical replies: the whole episode, token for token
    assert got["vrag_rl"]["scripted"]["images"] > 0  # its search showed pages: image data went through the stream


def image_bytes(root: Path) -> tuple[int, int, dict[str, int]]:
    """(distinct image bytes, image files whose bytes another file holds too, bytes per top-level folder). The export
    was moved with a plain copy (hard links would have become files of their own): every image file counts."""
    import hashlib

    distinct: dict[str, int] = {}
    n_images = 0
    folders: dict[str, int] = {}
    for p in (p for p in root.rglob("*") if p.is_file()):
        size, parts = p.stat().st_size, p.relative_to(root).parts
        if len(parts) > 1:
            folders[parts[0]] = folders.get(parts[0], 0) + size
        if p.suffix == ".jpg":
            n_images += 1
            distinct.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), size)
    return sum(distinct.values()), n_images - len(distinct), folders


@pytest.mark.parametrize("recipe", RECIPES)
def test_images_stored_once_within_their_bytes(exports, recipe):
    """One file per distinct image (a page shown whole by SFT and RL records alike is one file); hf/ is `datasets`'
    image-folder layout (`export.hf_images: folder`, the default: a copied hf/ loads alone) holding each image its
    rows show once, and each folder of the export holds at most 1.3x the distinct image bytes."""
    import hashlib

    import pyarrow.parquet as pq

    root = exports / recipe
    distinct, duplicates, folders = image_bytes(root)
    ratios = {k: round(v / distinct, 2) for k, v in folders.items()}
    print(f"{recipe}: folder bytes / distinct image bytes {ratios}, {duplicates} duplicate image files")
    assert duplicates == 0
    # search/ is the pages an episode retrieves with their index, not images the rows show
    over = {k: r for k, r in ratios.items() if k != "search" and folders[k] > 1.3 * distinct}
    assert not over, f"{recipe}: folders over 1.3x the distinct image bytes: {over}"
    shards = sorted((root / "hf" / "data").glob("*.parquet"))
    names = {n for f in shards if "images_file_names" in pq.read_schema(f).names
             for r in pq.read_table(f, columns=["images_file_names"]).to_pylist() for n in r["images_file_names"]}
    held = sorted((root / "hf" / "data" / "images").glob("*")) if (root / "hf" / "data" / "images").is_dir() else []
    # the export's one image folder: every image an hf row shows is in it, and every image in it is named by a row of
    # some format (hf, LLaMA-Factory, verl, EasyR1): none is stored for nobody
    assert shards and names <= {f"images/{p.name}" for p in held}
    data = "\n".join([*(f.read_text() for f in root.rglob("*.json*") if f.is_file()),
                       *(json.dumps(pq.read_table(f).to_pylist(), default=lambda b: "") for f in root.rglob("*.parquet"))])
    assert not [p.name for p in held if p.name not in data]
    assert len({hashlib.sha256(p.read_bytes()).digest() for p in held}) == len(held)


@pytest.mark.parametrize("recipe", RECIPES)
def test_vragrl_fork_reads_embedded_bytes(exports, recipe):
    """VRAG-RL's fork reads its parquet with pandas and opens each `images` entry as `Image.open(BytesIO(image['bytes']))`
    (its rl_dataset; the fork is not on the package registry, so that read is re-enacted): a `--for vragrl` export's
    rows carry the bytes; the RL rows of the search recipes carry no images (pages come from search/)."""
    import io

    import pandas as pd
    from PIL import Image

    root = exports / "_for_vragrl" / recipe
    n_images = 0
    for f in sorted((root / "verl").glob("*.parquet")):
        df = pd.read_parquet(f)
        for images in df["images"] if "images" in df else []:
            for image in images:
                assert Image.open(io.BytesIO(image["bytes"])).size[0] > 0
                n_images += 1
    assert (n_images > 0) == (recipe == "evisrag")


def test_easyr1_readme_command_is_one_merged_config(exports, tiny):
    """README's EasyR1 command, parsed as EasyR1's `verl.trainer.main.main` does (`OmegaConf.from_cli`, pop the one
    `config=`, merge the file, then the other arguments over it), in the verl environment's OmegaConf: the user's model
    and batch size survive, and the data files named exist in the export."""
    import re
    import shlex

    readme = (HERE.parent / "README.md").read_text()
    block = re.search(r"```bash\ncd <export>\n(python3 -m verl\.trainer\.main .*?)```", readme, re.S)
    assert block, "README: the EasyR1 command block is missing"
    root = exports / "evisrag"
    rows = sum(len(f.read_text().splitlines()) for f in (root / "easyr1" / "train").glob("*.jsonl"))
    fill = {"<your model>": str(tiny), "<at most the rows of easyr1/train>": str(rows), "<gpus>": "1"}
    args = shlex.split(re.sub(r"<[^>]+>", lambda m: fill[m.group(0)], block.group(1).replace("\\\n", " ")))[3:]
    assert sum(a.startswith("config=") for a in args) == 1, "EasyR1 keeps only the last config="
    code = (
        "import json, sys\nfrom omegaconf import OmegaConf\n"
        "cli = OmegaConf.from_cli(sys.argv[1:])\ncfg = OmegaConf.create()\n"
        "if hasattr(cli, 'config'):\n    cfg = OmegaConf.merge(cfg, OmegaConf.load(cli.pop('config', None)))\n"
        "cfg = OmegaConf.merge(cfg, cli)\nprint(json.dumps(OmegaConf.to_container(cfg)))\n"
    )
    proc = subprocess.run([str(ensure(ENVS, "verl")), "-c", code, *args], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = json.loads(proc.stdout.strip().splitlines()[-1])
    assert cfg["worker"]["actor"]["model"]["model_path"] == str(tiny)
    assert cfg["data"]["rollout_batch_size"] == rows > 0
    assert (root / cfg["data"]["train_files"]).is_dir() and cfg["worker"]["reward"]["reward_function"]


def test_visor_retrieval_reward_gets_page_lists(exports, monkeypatch):
    """VISOR's RL rows carry no page: the export's search/ folder, served by `vrag-data serve-search`'s app with the
    workspace gone, answers the rollout's own <search> queries; the page ids of its hits, passed as
    `extra_info.search_results`, give the shipped reward a retrieval term that tells a search that found the gold page
    from one that did not."""
    import importlib.util
    import re

    import pyarrow.parquet as pq
    from fastapi.testclient import TestClient

    from vrag_data.retrieve.server import create_app
    from vrag_data.store import Workspace

    root = exports / "visor"
    monkeypatch.chdir(root)
    monkeypatch.setenv("VRAG_REWARD_JUDGE", "rules")
    client = TestClient(create_app(Workspace(str(root / "search")), image_file="name"))
    spec = importlib.util.spec_from_file_location("visor_reward", root / "reward" / "compute_score.py")
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    sft = {}
    for f in sorted((root / "hf" / "data").glob("sft-*.parquet")):
        for r in pq.read_table(f, columns=["task_id", "messages"]).to_pylist():
            sft.setdefault(r["task_id"], "".join(m["content"] for m in r["messages"] if m["role"] == "assistant"))
    checked = 0
    for f in sorted((root / "verl").glob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            response = sft.get(row["extra_info"]["task_id"])
            if not response:
                continue
            queries = re.findall(r"<search>(.*?)</search>", response, re.S)
            found = [[h["image_file"].removesuffix(".jpg") for h in client.get("/search", params={"queries": q, "top_k": 3}).json()[0]]
                     for q in queries]
            gold = set(row["extra_info"]["gold_pages"])
            if not gold or not gold <= {p for r in found for p in r}:
                continue  # the rollout's own queries did not find every gold page: no hit to compare with a miss
            extra = dict(row["extra_info"], search_results=found)
            hit = reward.compute_score(row["data_source"], response, row["reward_model"]["ground_truth"], extra)
            miss = reward.compute_score(row["data_source"], response, row["reward_model"]["ground_truth"],
                                        dict(row["extra_info"], search_results=[["no_such_page_1"] for _ in found]))
            assert _score(hit) > _score(miss), f"{row['id']}: {hit} vs {miss}"
            checked += 1
    assert checked > 0


def _score(result: dict | float) -> float:
    """verl's entry point returns a dict with `score`; the fork's a float."""
    return float(result["score"]) if isinstance(result, dict) else float(result)


@pytest.fixture
def served_search(exports):
    """`vrag-data serve-search -w <moved export>/search` as a user starts it (a process on 127.0.0.1): a factory."""
    import socket
    import time
    import urllib.request

    procs = []

    def start(root: Path) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        exe = Path(sys.executable).parent / "vrag-data"
        proc = subprocess.Popen([str(exe), "serve-search", "-w", str(root / "search"), "--port", str(port)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}/search"
        for _ in range(300):
            assert proc.poll() is None, proc.stdout.read()
            try:
                urllib.request.urlopen(url + "?queries=revenue", timeout=2).read()
                return url
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"serve-search on {root} did not answer in 30 s")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r != "evisrag"])  # EVisRAG's rows carry their pages
@pytest.mark.skipif(not VRAGRL_SRC, reason="VRAG-RL's fork is not on the package registry: set VRAGRL_SRC to a checkout "
                    "of Alibaba-NLP/VRAG (or put it in <consumers dir>/src/VRAG)")
def test_vragrl_rollout_searches_the_pages_the_export_ships(exports, tiny, served_search, recipe):
    """RL rows without images are self-contained with the export's search/: served from the moved folder (workspace
    gone), VRAG-RL's own rollout step sends each row's question, opens the hit as its observation (an image from the
    export's search/pages); every gold page is one of the served pages, and a question's first hit is a gold page
    for some rows (the sample corpus's two documents share their wording: about half)."""
    _fork_runs(recipe)
    root = exports / VRAGRL / recipe
    assert (root / "search" / "index").is_dir() and (root / "search" / "pages").is_dir()
    got = run_check("verl", "check_vragrl_search.py", root, tiny, {"VRAGRL_SRC": VRAGRL_SRC, "SEARCH_URL": served_search(root)})
    summary = json.loads((root / "summary.json").read_text())
    print(f"{recipe}: {got['rows']} rows, first hit a gold page on {got['gold_first_hits']}")
    assert got["rows"] == got["images_shown"] == sum(summary["counts"]["verl"].values()) > 0
    assert got["gold_pages_missing"] == [] and got["gold_first_hits"] > 0, got


def _fork_runs(recipe: str) -> None:
    from vrag_data.recipe import get_recipe

    why = get_recipe(recipe).export.not_for.get("vragrl")
    if why:
        pytest.skip(f"{recipe}: its export refuses --for vragrl ({why[:80]})")

