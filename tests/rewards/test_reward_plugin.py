"""Rewards as plugins: a reward is one module (a `Reward` subclass: weights, knobs, judged or not, format check,
score) and one registration line; it scores by name wherever a shipped one does (a trajectory, a trainer's row), and
names are refused in one line when taken, unknown or unloadable. Values below are computed by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.plugin_site import site_package
from tests.support.rewards_factory import make_task, make_traj
from vrag_data.rewards import registry as reward_registry
from vrag_data.rewards.recipes import score_trajectory
from vrag_data.rewards.registry import Reward, get_reward, known_rewards, register_reward
from vrag_data.rewards.verl import compute_score

SHORT_ANSWER = '''
    from vrag_data.rewards.format import tag_contents
    from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, weighted


    class ShortAnswer(Reward):
        """Half for the right answer, half for an answer of at most `max_chars` characters."""

        name = "short_answer"
        weights = {"correct": 0.5, "brevity": 0.5}
        params = {"max_chars": 5.0}
        judged = True

        def format_score(self, texts):
            return float(bool(tag_contents("\\n".join(texts), "answer")))

        def score(self, ep, gold, w, p, judge_score, honesty_score):
            comps = {"correct": judge_or_rules(ep, gold, judge_score),
                     "brevity": float(len(ep.final_answer or "") <= p["max_chars"])}
            return RewardBreakdown(self.name, comps, w, weighted(comps, w))
'''


def _site_package(tmp_path: Path, entry: str, module: str = "") -> Path:
    return site_package(tmp_path, "my_rewards", "vrag_data.rewards", entry, module)


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    site = _site_package(tmp_path, "short_answer = my_rewards:ShortAnswer", SHORT_ANSWER)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)
    monkeypatch.setattr(reward_registry.REWARDS, "loaded", False)
    yield site
    reward_registry.REWARDS.unregister("short_answer")


def test_a_reward_announced_by_an_entry_point_scores_a_trajectory_and_a_trainer_row(plugin_site):
    assert "short_answer" in known_rewards() and {"vrag_rl", "visor", "evisrag"} <= set(known_rewards())
    task = make_task(answer="42", pages=["doc_3"])
    right = make_traj(task, [("search", "revenue", ["doc_3"]), ("answer", "42")], recipe="vrag_rl")
    wordy = make_traj(task, [("answer", "the answer is 41")], recipe="vrag_rl")
    # right and short: 0.5 * 1 + 0.5 * 1; wrong (the rule scorer) and 16 characters long: 0.5 * 0 + 0.5 * 0
    assert score_trajectory(right, task, "short_answer").total == pytest.approx(1.0)
    assert score_trajectory(wordy, task, "short_answer").total == pytest.approx(0.0)
    # a judge's verdict replaces the rule scorer; weights and knobs are overridden by name
    assert score_trajectory(wordy, task, "short_answer", judge_score=1.0).total == pytest.approx(0.5)
    assert score_trajectory(wordy, task, "short_answer", judge_score=1.0,
                            params={"max_chars": 20}).total == pytest.approx(1.0)
    assert score_trajectory(right, task, "short_answer", weights={"brevity": 0.0}).total == pytest.approx(0.5)
    with pytest.raises(ValueError, match="short_answer: unknown reward weight 'length'"):
        score_trajectory(right, task, "short_answer", weights={"length": 1.0})
    # the trainer's entry point: the row names its reward; a judged reward asks for its judge or rules, explicitly
    row = {"reward": "short_answer", "question": task.question, "gold_pages": ["doc_3"], "task_id": task.task_id}
    got = compute_score("vrag", "<search>revenue</search><answer>42</answer>", "42", row, judge="rules")
    assert got == {"score": 1.0, "correct": 1.0, "brevity": 1.0, "gated": 0.0}
    assert get_reward("short_answer").judged and not get_reward("short_answer").honesty_gate


def test_register_refuses_a_taken_name_and_an_object_that_is_no_reward():
    class Impostor(Reward):
        name = "visor"
        weights = {"x": 1.0}

    with pytest.raises(ValueError, match="the name 'visor' is taken by VisorReward; pick another name"):
        register_reward(Impostor)
    with pytest.raises(ValueError, match="is not a Reward"):
        register_reward(object())  # type: ignore[arg-type]

    class Nameless(Reward):
        weights = {"x": 1.0}

    class Weightless(Reward):
        name = "weightless"
        weights = {}

    with pytest.raises(ValueError, match="Nameless'> has no name; give it a `name`"):
        register_reward(Nameless)
    with pytest.raises(ValueError, match="Weightless needs a `name` and non-empty `weights`"):
        register_reward(Weightless)
    with pytest.raises(ValueError, match=r"unknown reward 'visr'; known: \[.*'visor'"):
        get_reward("visr")
    assert type(get_reward("visor")).__name__ == "VisorReward"  # the refused registrations changed nothing


def test_an_entry_point_that_cannot_be_loaded_stops_with_one_line_naming_it(tmp_path, monkeypatch):
    site = _site_package(tmp_path, "gone = no_such_reward_module:Gone")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(reward_registry.REWARDS, "loaded", False)
    with pytest.raises(ValueError) as err:
        known_rewards()
    msg = str(err.value)
    assert "no_such_reward_module:Gone" in msg and "'gone'" in msg and "\n" not in msg
    monkeypatch.setattr(reward_registry.REWARDS, "loaded", True)


def test_each_shipped_reward_is_one_module_of_the_kinds_package_and_scores_its_own_components():
    task = make_task(answer="42", pages=["doc_3"])
    traj = make_traj(task, [("search", "revenue", ["doc_3"]), ("answer", "42")], recipe="vrag_rl")
    kinds = Path(reward_registry.__file__).parent / "kinds"
    shipped = sorted(p.stem for p in kinds.glob("*.py") if p.stem != "__init__")
    # every module of the folder is found (no list kept by hand) and holds the reward of its own name
    assert shipped and set(shipped) <= set(known_rewards())
    for name in shipped:
        reward = get_reward(name)
        assert type(reward).__module__ == f"vrag_data.rewards.kinds.{name}" and reward.name == name
        got = score_trajectory(traj, task, name)
        assert got.recipe == name and set(got.components) == set(reward.weights), name


def test_an_entry_point_naming_something_that_is_no_reward_is_one_line(tmp_path, monkeypatch):
    site = _site_package(tmp_path, "odd = os:sep")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(reward_registry.REWARDS, "loaded", False)
    with pytest.raises(ValueError, match=r"^reward plugin 'odd' \(os:sep\) is neither a Reward nor a module"):
        known_rewards()
    monkeypatch.setattr(reward_registry.REWARDS, "loaded", True)
