"""The reward bundle an export ships (`<export>/reward/`) runs on the Python standard library alone: every entry point
(verl >= 0.9's dict, VRAG-RL's fork's float, EasyR1's batch) is loaded in a bare interpreter (`python -I -S`: no
site-packages at all, only the bundle folder on the path) and scores a right answer above a wrong one on every
recipe's reward; the model judge is asked over HTTP with urllib."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vrag_data.export.reward_bundle import ENTRY_POINTS, PACKAGE, REWARD_MODULES, bundle_files, write_reward_bundle
from tests.support.shipped import SHIPPED

EVIDENCE_GT = "<evidence>\n[1]: revenue was 42\n</evidence>\n<answer>42</answer>"
# one rollout per reward: (verl data_source, extra_info, right response, ground truth); the wrong response is the
# right one with its final answer replaced
CASES = {
    "vrag_rl": ("rag", {"reward": "vrag_rl", "question": "q", "gold_pages": ["d_1"], "retrieved_pages": ["d_1"],
                        "search_results": [["d_1"]]},
                "<think>a</think><search>q</search><think>b</think><answer>42</answer>", "42"),
    "unidoc_rl": ("rag", {"reward": "unidoc_rl", "question": "q", "gold_pages": ["d_1"], "search_results": [["d_1"]],
                          "selections": [], "gold_boxes": {}, "coord_space": "qwen3-vl"},
                  "<think>a</think><search>q</search>\n<think>b</think><answer>42</answer>", "42"),
    "visor": ("rag", {"reward": "visor", "question": "q", "gold_pages": ["d_1"], "search_results": [["d_1"], ["d_1"]],
                      "retrieved_pages": ["d_1"]},
              "<think>a</think><search>q</search>\n<think>b</think><search>q2</search>\n<think>c</think><answer>42</answer>", "42"),
    "evisrag": ("rag", {"reward": "evisrag", "question": "q", "gold_pages": ["d_1"], "shown_pages": ["d_1"]},
                "<observe>a page</observe>\n<evidence>\n[1]: revenue was 42\n</evidence>\n<think>so</think>\n<answer>42</answer>",
                EVIDENCE_GT),
    "mmdoc_r1": ("rag", {"reward": "mmdoc_r1", "question": "q", "gold_pages": ["d_1"], "read_pages": ["d_1"]},
                 '<think>a</think><search>["q"]</search>\n<think>b</think><answer>42</answer>', "42"),
}

PROBE = r'''
import importlib.util, json, os, sys
bundle, cases = sys.argv[1], json.loads(open(sys.argv[2]).read())
kw = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
def load(name):
    spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(bundle, name))
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
verl, fork, easyr1 = load("compute_score.py"), load("vragrl_reward.py"), load("easyr1_reward.py")
out = {}
for reward, (source, extra, right, gt) in cases.items():
    wrong = right[: right.rindex("<answer>")] + "<answer>zzz no such value</answer>"
    row = {}
    for name, sol in (("right", right), ("wrong", wrong)):
        ez_gt = gt if reward == "evisrag" else json.dumps({"data_source": source, "ground_truth": gt, "extra_info": extra})
        ez_item = {"response": sol, "response_length": len(sol), "ground_truth": ez_gt}
        if reward == "evisrag":
            ez_item.update(shown_pages=extra["shown_pages"], gold_pages=extra["gold_pages"])
        row[name] = {"verl": verl.compute_score(source, sol, gt, extra, **kw),
                     "fork": fork.compute_score(source, sol, gt, extra, **kw),
                     "fork_total": fork.total_score(source, sol, gt, extra, **kw),
                     "easyr1": easyr1.compute_score([ez_item], **kw)[0]}
    out[reward] = row
third = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)
               - {"__main__", "vrag_reward", "compute_score", "vragrl_reward", "easyr1_reward"})
print(json.dumps({"scores": out, "third_party": third, "site": "site" in sys.modules,
                  "outside": sorted(k for k, v in sys.modules.items() if k.startswith("vrag_reward")
                                    and not v.__file__.startswith(bundle))}))
'''


def bare(bundle: Path, tmp_path: Path, kw: dict | None = None, env: dict | None = None) -> dict:
    """Run the probe in `python -I -S` (isolated, no `site`: no site-packages, no user site, no PYTHON* variables)."""
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "cases.json").write_text(json.dumps(CASES))
    proc = subprocess.run([sys.executable, "-I", "-S", str(tmp_path / "probe.py"), str(bundle), str(tmp_path / "cases.json"),
                           json.dumps(kw or {})], capture_output=True, text=True, env=env or {}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_cases_cover_every_recipes_reward():
    from vrag_data.recipe import get_recipe

    assert {get_recipe(r).reward.name for r in SHIPPED} <= set(CASES)


def test_library_reward_closure_is_the_bundle_and_the_standard_library():
    """The modules the entry points import, in a fresh interpreter, are exactly REWARD_MODULES: no pydantic, nothing
    outside the standard library (the package's editable-install finder aside)."""
    probe = ("import sys, json; import vrag_data.rewards.verl, vrag_data.rewards.easyr1, vrag_data.rewards.vragrl\n"
             "vrag_data.rewards.registry.known_rewards()  # the registered rewards' modules load on first use\n"
             "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] == 'vrag_data'),\n"
             "  sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names))]))")
    got, top = json.loads(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert got == sorted("vrag_data" + ("." + m.removesuffix("__init__").replace("/", ".")).rstrip(".") for m in REWARD_MODULES)
    assert {t for t in top if not t.startswith("_")} == {"vrag_data"}


def test_bundle_is_generated_from_the_library(tmp_path):
    """Every bundled module is the library's file with its imports renamed (and a header line), nothing hand-written;
    a second write is identical and removes files an older bundle left behind."""
    files = bundle_files()
    root = Path(__import__("vrag_data").__file__).parent
    for mod in REWARD_MODULES:
        text = files[f"{PACKAGE}/{mod}.py"]
        assert not re.search(r"^\s*(from|import) vrag_data\b", text, re.M), mod
        if not mod.endswith("__init__"):
            body = text.split("\n", 1)[1].replace(f"from {PACKAGE}", "from vrag_data").replace(f"import {PACKAGE}", "import vrag_data")
            assert body == (root / f"{mod}.py").read_text()
    assert set(ENTRY_POINTS) <= set(files) and "requirements.txt" not in files
    old = tmp_path / "reward" / "vrag_data" / "rewards" / "verl.py"
    old.parent.mkdir(parents=True)
    old.write_text("import pydantic\n")
    (tmp_path / "reward" / "requirements.txt").write_text("pydantic>=2.7,<3\n")
    bundle = write_reward_bundle(tmp_path)
    assert sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()) == sorted(files)


def test_every_entry_point_in_a_bare_interpreter(tmp_path):
    """No site-packages: only the standard library and the bundle. Each entry point's shape: verl a dict with `score`
    (the same keys for right and wrong), the fork a float (VRAG-RL's format term for the fork's data sources, the
    whole score of the row's reward under another data source), EasyR1 one dict with `overall` per input. Right > wrong on every reward (the fork's float is the
    format gate under its data sources: its manager adds the judge, see consumers/check_vragrl.py)."""
    got = bare(write_reward_bundle(tmp_path / "export"), tmp_path, {"judge": "rules"})
    assert got["third_party"] == [] and got["site"] is False and got["outside"] == []
    for reward, s in got["scores"].items():
        right, wrong = s["right"], s["wrong"]
        assert right["verl"]["score"] > wrong["verl"]["score"], reward
        assert set(right["verl"]) == set(wrong["verl"]), reward
        assert right["easyr1"]["overall"] > wrong["easyr1"]["overall"], reward
        assert right["easyr1"]["overall"] == pytest.approx(right["verl"]["score"]), reward
        assert isinstance(right["fork"], float) and right["fork_total"] > wrong["fork_total"], reward
        assert right["fork_total"] == pytest.approx(right["verl"]["score"]), reward
        if reward == "evisrag":  # its tagged ground truth: EVisRAG's own reward
            assert right["fork"] == right["verl"]["score"] > wrong["fork"]
        else:  # data_source "rag": VRAG-RL's format term, the gate the fork's manager judges behind
            assert right["fork"] == wrong["fork"] == 1.0, reward


def test_bundle_scores_as_the_library(tmp_path, monkeypatch):
    """Same inputs, same scores: the bundle in a bare interpreter and the installed library."""
    from vrag_data.rewards import easyr1, vragrl
    from vrag_data.rewards.verl import compute_score

    got = bare(write_reward_bundle(tmp_path / "export"), tmp_path, {"judge": "rules"})["scores"]
    for reward, (source, extra, right, gt) in CASES.items():
        assert got[reward]["right"]["verl"] == pytest.approx(compute_score(source, right, gt, extra, judge="rules"))
        assert got[reward]["right"]["fork"] == pytest.approx(vragrl.compute_score(source, right, gt, extra, judge="rules"))
        if reward == "evisrag":
            item = {"response": right, "ground_truth": gt, "shown_pages": ["d_1"], "gold_pages": ["d_1"]}
            assert got[reward]["right"]["easyr1"] == pytest.approx(easyr1.compute_score([item], judge="rules")[0])


def test_bundle_judge_over_http_with_urllib(tmp_path):
    """The judged rewards ask an OpenAI-compatible endpoint over HTTP from the bare interpreter (urllib: no openai,
    no requests): the judge's verdict decides the answer term, and right > wrong."""
    from tests.support.openai_server import OpenAIServer

    def verdict(req: dict) -> str:
        return "<judge>True</judge>" if "zzz" not in req["messages"][-1]["content"] else "<judge>False</judge>"

    with OpenAIServer(reply=verdict) as srv:
        got = bare(write_reward_bundle(tmp_path / "export"), tmp_path,
                   env={"VRAG_JUDGE_URL": srv.base_url, "VRAG_JUDGE_MODEL": "teacher"})
        asked = len(srv.requests)
    assert got["third_party"] == [] and asked > 0
    for reward in ("vrag_rl", "unidoc_rl", "visor", "mmdoc_r1"):
        r, w = got["scores"][reward]["right"]["verl"], got["scores"][reward]["wrong"]["verl"]
        assert r["score"] > w["score"], reward
        assert r.get("judge", r.get("answer", r.get("correctness"))) == 1.0, reward


def test_bundle_without_a_judge_stops_with_one_line(tmp_path):
    bundle = write_reward_bundle(tmp_path / "export")
    code = (f"import sys; sys.path.insert(0, {str(bundle)!r})\n"
            "from compute_score import compute_score\n"
            "compute_score('rag', '<search>q</search><answer>1</answer>', '1',\n"
            "              {'reward': 'vrag_rl', 'gold_pages': ['d_1'], 'search_results': [['d_1']]})\n")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, env={})
    assert proc.returncode != 0 and "VRAG_JUDGE_URL" in proc.stderr.strip().splitlines()[-1]


def test_fork_float_dispatches_on_the_data_source():
    """VRAG-RL's fork: its four data sources get VRAG-RL's format term (0 without <search>), as the fork's own scorer;
    another data source gets the row's own reward as a float; gold pages come from the fork's file_name/reference_page
    (its training loop keeps only those, the question and the answer in extra_info)."""
    import numpy as np

    from vrag_data.rewards import vragrl

    sol = "<think>a</think><search>q</search><think>b</think><answer>42</answer>"
    fork_extra = {"file_name": "d.pdf", "reference_page": np.array([1]), "question": "q", "answer": "42"}
    for source in vragrl.FORK_DATA_SOURCES:
        assert vragrl.compute_score(source, sol, "42", fork_extra) == 1.0
        assert vragrl.compute_score(source, "<think>a</think><answer>42</answer>", "42", fork_extra) == 0.0
    assert vragrl.fork_extra(fork_extra)["gold_pages"] == ["d_1"]
    extra = {**fork_extra, "reward": "mmdoc_r1", "read_pages": ["d_1"]}
    assert vragrl.compute_score("mine", sol, "42", extra, judge="rules") == pytest.approx(2.0)
    assert vragrl.compute_score("mine", sol.replace("42", "7"), "42", extra, judge="rules") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="slidevqa_test"):
        vragrl.compute_score("mine", sol, "42", fork_extra)


def test_a_row_whose_reward_cannot_travel_stops_the_export_in_one_line(tmp_path, monkeypatch):
    """The bundle carries the module of every reward the rows name; a reward it cannot carry (unknown, or a module that
    imports beyond the standard library and vrag-data's reward code) is refused for the row naming it, in one line,
    instead of a bundle the trainer fails on (`ValueError: unknown reward ...` under `python -I -S`)."""
    from vrag_data.export.reward_bundle import RewardBundle, UnshippableReward
    from vrag_data.rewards.registry import REWARDS

    (tmp_path / "heavy_reward.py").write_text(
        "import yaml\nfrom vrag_data.rewards.registry import Reward, register_reward\n\n\n"
        "class Heavy(Reward):\n    name = 'heavy'\n    weights = {'x': 1.0}\n\n\nregister_reward(Heavy)\n")
    (tmp_path / "light_reward.py").write_text(
        "import re\nfrom vrag_data.rewards.registry import Reward, RewardBreakdown, register_reward\n\n\n"
        "class Light(Reward):\n    name = 'light'\n    weights = {'x': 1.0}\n\n\nregister_reward(Light)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import heavy_reward  # noqa: F401
    import light_reward  # noqa: F401

    try:
        bundle = RewardBundle()
        for reward, why in (("audited_answer", "unknown reward 'audited_answer'"),
                            ("heavy", "its module heavy_reward imports 'yaml', which the bundle does not carry"),
                            ("", "the row names no reward")):
            with pytest.raises(UnshippableReward) as err:
                bundle.add(reward, "t1-s0")
            msg = str(err.value)
            assert msg.startswith(f"export: row t1-s0 names reward {reward!r}, which the reward bundle cannot carry: ")
            assert why in msg and "\n" not in msg
        bundle.add("light", "t2-s0")
        bundle.add("vrag_rl", "t3-s0")  # the library's own: carried already
        written = write_reward_bundle(tmp_path / "export", bundle.extra)
        copied = written / PACKAGE / "rewards" / "kinds" / "plugin_light_reward.py"
        assert copied.is_file() and "from vrag_reward.rewards.registry import" in copied.read_text()
        assert sorted(bundle.extra) == [f"{PACKAGE}/rewards/kinds/plugin_light_reward.py"]
    finally:
        REWARDS.unregister("heavy")
        REWARDS.unregister("light")
