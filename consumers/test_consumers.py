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

HERE = Path(__file__).resolve().parent
ENVS = Path(os.environ.get("VRAG_CONSUMERS_DIR", HERE.parent / ".consumers")).resolve()
sys.path.insert(0, str(HERE.parent))

from consumers.build_exports import build  # noqa: E402
from consumers.envs import ensure  # noqa: E402
from consumers.make_tiny_model import make  # noqa: E402
from vrag_data.export.reward_bundle import REQUIREMENTS  # noqa: E402
from vrag_data.recipe import recipe_names  # noqa: E402

RECIPES = tuple(recipe_names())
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("moved") / "exports"
    assert build(out) == list(RECIPES)
    return out


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    return make(tmp_path_factory.mktemp("tiny-model"))


def run_check(env: str, script: str, root: Path, tiny: Path, extra_env: dict[str, str] | None = None) -> dict:
    py = ensure(ENVS, env)
    proc = subprocess.run([str(py), str(HERE / script), str(root), str(tiny)], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "HF_HUB_OFFLINE": "1", **(extra_env or {})}, timeout=1800)
    assert proc.returncode == 0, f"{script} on {root.name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("recipe", RECIPES)
def test_llamafactory_sft_pipeline(exports, tiny, recipe):
    got = run_check("llamafactory", "check_llamafactory.py", exports / recipe, tiny)
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["records"] == summary["counts"]["llamafactory"][recipe] > 0


@pytest.mark.parametrize("recipe", RECIPES)
def test_verl_dataset_and_reward(exports, tiny, recipe):
    got = run_check("verl", "check_verl.py", exports / recipe, tiny)
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["rows"] == summary["counts"]["verl"]["train"] > 0
    assert got["rewards_checked"] > 0


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.skipif(not os.environ.get("EASYR1_SRC"), reason="EasyR1 is not on the package registry: set EASYR1_SRC to a checkout")
def test_easyr1_dataset_and_reward(exports, tiny, recipe):
    got = run_check("easyr1", "check_easyr1.py", exports / recipe, tiny, {"EASYR1_SRC": os.environ.get("EASYR1_SRC", "")})
    summary = json.loads((exports / recipe / "summary.json").read_text())
    assert got["rows"] == summary["counts"]["easyr1"]["train"] > 0 and got["rewards_checked"] > 0


@pytest.mark.parametrize("recipe", RECIPES)
def test_datasets_load_each_config(exports, recipe):
    """`datasets.load_dataset` on the moved folder, one config per record type, in a clean environment's sense:
    the main environment's `datasets`, with the workspace gone."""
    import datasets

    root = exports / recipe
    summary = json.loads((root / "summary.json").read_text())
    for config in ("sft", "rl"):
        n = summary["counts"]["hf"][config]
        ds = datasets.load_dataset(str(root / "hf"), config, split="train")
        assert len(ds) == n
        row = next((r for r in ds if r["images"]), None)
        if row is not None:
            assert all(im.size[0] > 0 for im in row["images"])


def test_reward_in_a_clean_environment(exports):
    """The shipped reward/ scores a rollout in an environment holding only what reward/requirements.txt names."""
    root = exports / "vrag_rl"
    assert (root / "reward" / "requirements.txt").read_text() == REQUIREMENTS
    assert (HERE / "requirements-reward.txt").read_text().strip().endswith(REQUIREMENTS.strip())
    py = ensure(ENVS, "reward")
    code = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('r', 'reward/compute_score.py')\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "extra = {'reward': 'vrag_rl', 'question': 'q', 'gold_pages': ['d_1'], 'retrieved_pages': ['d_1']}\n"
        "s = '<think>a</think><search>q</search><think>b</think><answer>42</answer>'\n"
        "print(json.dumps([m.compute_score('rag', s, '42', extra)['score'],\n"
        "                  m.compute_score('rag', s.replace('42', '7'), '42', extra)['score'],\n"
        "                  sorted(k for k in sys.modules if k.split('.')[0] == 'vrag_data' and\n"
        "                         not sys.modules[k].__file__.startswith(sys.path[0]))]))\n"
    )
    proc = subprocess.run([str(py), "-I", "-c", f"import os, sys; sys.path.insert(0, os.path.abspath('reward'))\n{code}"], cwd=root,
                          capture_output=True, text=True, env={"VRAG_REWARD_JUDGE": "rules", "PATH": os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    right, wrong, outside = json.loads(proc.stdout.strip().splitlines()[-1])
    # VRAG-RL: 0.7 judge + 0.1 format + 0.2 NDCG; the wrong answer keeps format and NDCG
    assert right == pytest.approx(1.0) and wrong == pytest.approx(0.3) and outside == []


@pytest.mark.parametrize("recipe", RECIPES)
def test_bundled_trainer_reads_the_moved_export(exports, recipe):
    """`vrag-data train sft --data <export>` reads every SFT record of the moved folder, every image found on disk
    (or embedded), nothing skipped."""
    from vrag_data.train.data import load_sft_examples

    root = exports / recipe
    summary = json.loads((root / "summary.json").read_text())
    examples, skipped = load_sft_examples(root / "llamafactory")
    assert not skipped and len(examples) == summary["counts"]["llamafactory"][recipe] > 0
    for ex in examples:
        assert all(isinstance(im, bytes) or (Path(im).is_file() and root in Path(im).parents) for im in ex.images)


def test_verl_agent_loop(tiny, tmp_path):
    """`train rl --engine verl --dry-run` per recipe on a kept workspace, then verl's own config loader, agent-loop
    construction and reward function in verl's environment (consumers/check_verl_agent_loop.py says what is compared)."""
    import sysconfig

    from tests.support.synth_workspace import cli, sample_workspace

    ws = sample_workspace(tmp_path)
    root = tmp_path / "verl-runs"
    for recipe in RECIPES:
        run = f"oracle-{recipe}"
        cli("synth", "-w", ws, "--recipe", recipe, "--policy", "oracle", "--run", run, "-q")
        cli("export", "-w", ws, "--run", run, "--out", tmp_path / "exports" / recipe, "--format", "verl")
        sets = ["model.path=" + str(tiny), "model.max_pixels=12544", "rl.judge=rules", "rl.max_turns=2",
                "rl.max_new_tokens=12", "rl.group_size=2", "rl.tasks_per_step=1", "verl.n_gpus_per_node=1",
                "verl.agent_workers=1", "verl.prompt_length=4096", "verl.response_length=4096"]
        if recipe == "visor":  # its evidence window rewrites the history: trained as the last segment, asked for
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
        assert r["trained_turns"] >= 1 and r["server_calls"] >= r["turns"], (recipe, r)
