"""RL: rollouts through the real environment and recipes, token-scoped advantages, the update step, resume, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")
from typer.testing import CliRunner

from tests.support.train_workspace import build_workspace
from vrag_data.recipe import get_recipe
from vrag_data.rewards.recipes import RewardBreakdown, score_trajectory
from vrag_data.schema.records import Trajectory
from vrag_data.store import read_records
from vrag_data.train.config import ModelConfig, RlConfig, TinyModelConfig, TrainConfig
from vrag_data.train.episode import Episode
from vrag_data.train.model import load_policy
from vrag_data.train.rollout import PolicySampler, TurnSample
from vrag_data.train.update import training_rows, update_policy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws, tasks = build_workspace(tmp_path_factory.mktemp("rl") / "ws", size=(84, 56))
    return ws, tasks


def _cfg(ws, out: Path, **rl) -> TrainConfig:
    base = {"group_size": 2, "tasks_per_step": 1, "max_steps": 2, "max_turns": 2, "max_new_tokens": 12,
            "learning_rate": 1e-3, "micro_batch_size": 4, "judge": "rules"}
    return TrainConfig(model=ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
                       rl=RlConfig(**{**base, **rl}), workspace=str(ws.root), output_dir=str(out))


def _rollouts(out: Path) -> list[Trajectory]:
    return read_records(str(out / "rollouts"), Trajectory)


def _check_rollouts(out: Path, ws, tasks, recipe: str, steps: int, group: int) -> list[Trajectory]:
    trajs = _rollouts(out)
    assert len(trajs) == steps * group
    assert len({t.traj_id for t in trajs}) == len(trajs)
    by_id = {t.task_id: t for t in tasks}
    for t in trajs:
        assert t.recipe == recipe and t.provenance.policy == "model"
        assert t.turns, "every episode took at least one policy turn"
        # the environment answered every parsed action: invalid ones with the recipe's re-prompt
        for turn in t.turns[:-1]:  # the last turn ends the episode; every earlier one got an observation
            assert turn.observation is not None
            if turn.action.kind == "invalid":
                assert turn.action.reason and turn.observation.kind == "error" and turn.observation.text
        # the reward stored with the rollout is the rewards module's breakdown of that very trajectory
        stored = t.extra["reward"]
        fresh = score_trajectory(t, by_id[t.task_id], recipe).as_dict()
        assert stored == pytest.approx(fresh)
    return trajs


def test_rl_grpo_two_steps_then_resume(workspace, tmp_path):
    from vrag_data.train.rl import run_rl

    ws, tasks = workspace
    out = tmp_path / "grpo"
    first = run_rl(_cfg(ws, out, estimator="grpo", recipe="vrag_rl", max_steps=1, save_steps=1), get_recipe("vrag_rl"))
    assert first.global_step == 1 and first.resumed_from is None
    assert (out / "checkpoint-1" / "rl_state.pt").is_file()  # resumable checkpoints asked for: the optimizer state
    second = run_rl(_cfg(ws, out, estimator="grpo", recipe="vrag_rl", max_steps=2, save_steps=1), get_recipe("vrag_rl"))
    assert second.resumed_from and second.resumed_from.endswith("checkpoint-1")
    assert [log.step for log in second.logs] == [2]  # step 1 is not rolled out again
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert all(x["tokens"] > 0 and x["trajectories"] == 2 for x in lines)
    _check_rollouts(out, ws, tasks, "vrag_rl", steps=2, group=2)
    assert (out / "final" / "config.json").is_file()
    from safetensors import safe_open

    with safe_open(str(next((out / "final").glob("*.safetensors"))), "pt") as f:  # the final model: bf16
        assert {str(f.get_tensor(k).dtype) for k in f.keys() if f.get_tensor(k).is_floating_point()} == {"torch.bfloat16"}
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]  # rl.save_total_limit 2


def test_rl_answer_reward_comes_from_the_judge_role(workspace, tmp_path):
    from tests.support.openai_server import OpenAIServer
    from vrag_data.config import EndpointConfig, RoleConfig
    from vrag_data.errors import VragError
    from vrag_data.train.rl import run_rl

    ws, tasks = workspace
    with pytest.raises(VragError, match="rl.judge"):
        run_rl(_cfg(ws, tmp_path / "none", estimator="grpo", recipe="vrag_rl", max_steps=1, judge=None), get_recipe("vrag_rl"))
    # a judge that says every answer is right: answered rollouts get judge 1.0 whatever the rules would say
    with OpenAIServer(reply=["<judge>True</judge>"]) as srv:
        judge = RoleConfig(endpoints=[EndpointConfig(base_url=srv.base_url, model="teacher")], max_retries=0)
        run_rl(_cfg(ws, tmp_path / "judged", estimator="grpo", recipe="vrag_rl", max_steps=1, judge=judge), get_recipe("vrag_rl"))
        asked = [r for r in srv.requests if r.path.endswith("/chat/completions")]
    trajs = _rollouts(tmp_path / "judged")
    answered = [t for t in trajs if t.final_answer]
    assert len(asked) == len(answered)
    for t in trajs:
        assert t.extra["reward"]["judge"] == (1.0 if t.final_answer else 0.0)


def test_answer_judge_scores_honesty_and_outage(tmp_path):
    from tests.support.openai_server import Faults, OpenAIServer
    from tests.support.rewards_factory import make_task, make_traj
    from vrag_data.config import EndpointConfig, RoleConfig
    from vrag_data.teacher.judge import HONESTY_SCORE, JudgeUnavailable
    from vrag_data.train.judging import AnswerJudge

    task = make_task(answer="42", pages=["doc_3"])
    found = make_traj(task, [("search", "q", ["doc_3"]), ("answer", "41")], sample=0)
    missed = make_traj(task, [("search", "q", ["doc_9"]), ("answer", "I cannot tell from these pages")], sample=1)
    silent = make_traj(task, [("search", "q", ["doc_3"])], sample=2)

    def role(url):  # noqa: ANN001, ANN202
        return RoleConfig(endpoints=[EndpointConfig(base_url=url, model="teacher")], max_retries=0)

    with OpenAIServer(reply=["<judge>True</judge>"]) as srv:
        j = AnswerJudge(role(srv.base_url), tmp_path, "r", honesty=True)
        try:
            scores = j.scores([found, missed, silent], task)
        finally:
            j.close()
    # the judge decides correctness (the rules would fail "41"); retrieval incomplete -> honesty credit;
    # no answer -> 0 without a call
    assert scores == [(1.0, None), (None, HONESTY_SCORE), (0.0, 0.0)] and len(srv.requests) >= 2
    assert AnswerJudge("rules", tmp_path, "r").scores([found], task) == [(None, None)]  # rules: asked for explicitly
    with OpenAIServer(reply=["<judge>True</judge>"], faults=Faults(p500=1.0)) as down:
        j = AnswerJudge(role(down.base_url), tmp_path / "down", "r")
        try:
            with pytest.raises(JudgeUnavailable, match="role judge"):
                j.scores([found], task)
        finally:
            j.close()


@pytest.mark.slow
def test_rl_rs_grpo_evisrag_shows_retrieved_pages(workspace, tmp_path):
    from vrag_data.train.rl import run_rl

    ws, tasks = workspace
    out = tmp_path / "rs"
    result = run_rl(_cfg(ws, out, estimator="rs_grpo", recipe="evisrag", max_turns=1), get_recipe("evisrag"))
    assert result.global_step == 2 and len(result.logs) == 2
    trajs = _check_rollouts(out, ws, tasks, "evisrag", steps=2, group=2)
    for t in trajs:
        # EVisRAG's one-turn episode: the pages BM25 found are in the prompt as images the policy saw
        shown = t.extra["shown_pages"]
        assert shown and all(Path(ws.page_image(p)).is_file() for p in shown)
        assert sum(len(m.images) for m in t.prompt) == len(shown)
        assert set(t.extra["reward"]) >= {"perception", "derivation", "format"}


@pytest.mark.slow
def test_cli_train_rl_spo(workspace, tmp_path):
    from vrag_data.cli.main import app

    ws, tasks = workspace
    out = tmp_path / "spo"
    r = CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs" / "train" / "tiny-rl.yaml"),
                                 "-w", str(ws.root), "--estimator", "spo", "--max-steps", "2", "--output", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 2
    _check_rollouts(out, ws, tasks, "vrag_rl", steps=2, group=2)
    bad = CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs" / "train" / "tiny-rl.yaml"),
                                   "--estimator", "ppo", "-w", str(ws.root)])
    assert bad.exit_code == 2 and "--estimator" in bad.output
    nows = CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs" / "train" / "tiny-rl.yaml"),
                                    "--max-steps", "1", "--output", str(tmp_path / "x")])
    assert nows.exit_code == 2 and "-w WORKSPACE" in nows.output


# ----------------------------------------------------------------- the pieces, without rollouts


@pytest.fixture(scope="module")
def policy():
    return load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84))


def _sample(policy, context: str, response: str) -> TurnSample:
    tok = policy.tokenizer
    ctx = tok(f"<|im_start|>user\n{context}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    resp = tok(response + "<|im_end|>", add_special_tokens=False)["input_ids"]
    return TurnSample(ctx, resp, response, None, None)


def _episode(sample: TurnSample) -> Episode:
    from vrag_data.schema.records import Provenance

    traj = Trajectory(traj_id="x", run_id="r", task_id="t", sample=0, recipe="evisrag", prompt=[],
                      provenance=Provenance(recipe="evisrag", policy="model"))
    return Episode(traj, [sample])


def test_training_rows_mask_exactly_the_generated_tokens(policy):
    s = _sample(policy, "Question: revenue? Observation: a page with a table.", "<answer>18</answer>")
    rows = training_rows([_episode(s)], [[[0.5] * len(s.response_ids)]])
    (row,) = rows
    assert row["ids"] == s.context_ids + s.response_ids
    assert row["mask"] == [0] * len(s.context_ids) + [1] * len(s.response_ids)
    assert row["adv"] == [0.0] * len(s.context_ids) + [0.5] * len(s.response_ids)


def test_rs_grpo_gives_each_token_its_scope_advantage(policy):
    from vrag_data.train.rl import group_advantages

    text = "<observe>a table</observe><evidence>[1]: 18</evidence><think>so</think><answer>18</answer>"
    eps = [_episode(_sample(policy, "q", text)) for _ in range(2)]
    comps = [{"perception": 1.0, "derivation": 0.0, "format": 1.0}, {"perception": 0.0, "derivation": 1.0, "format": 1.0}]
    bds = [RewardBreakdown("evisrag", c, {}, 0.0) for c in comps]
    cfg = TrainConfig(rl=RlConfig(estimator="rs_grpo", recipe="evisrag"))
    advs = group_advantages(cfg, eps, bds, None, policy.tokenizer, get_recipe("evisrag").reward.scopes)
    # observe/evidence: mean(perception, format) = 1.0 vs 0.5 -> +0.7071/-0.7071 (sample std 0.35355)
    # think/answer: mean(derivation, format) = 0.5 vs 1.0 -> -0.7071/+0.7071; outside tags: format only -> 0
    s = eps[0].samples[0]
    for tok_scope, a0, a1 in zip(s.scopes, advs[0][0], advs[1][0]):
        expected = {"observe": 0.70711, "evidence": 0.70711, "think": -0.70711, "answer": -0.70711, "other": 0.0}
        assert a0 == pytest.approx(expected[tok_scope], abs=1e-4)
        assert a1 == pytest.approx(-expected[tok_scope], abs=1e-4)
    assert {"observe", "evidence", "think", "answer", "other"} == set(s.scopes)  # <|im_end|> is "other"


def test_update_raises_the_better_response_and_lowers_the_worse(policy):
    import copy

    good = _sample(policy, "Question: revenue?", "<answer>18</answer>")
    bad = _sample(policy, "Question: revenue?", "<search>zebra</search>")
    model = copy.deepcopy(policy.model)
    pol = type(policy)(model, policy.tokenizer, policy.image_processor)
    rows = training_rows([_episode(good), _episode(bad)],
                         [[[1.0] * len(good.response_ids)], [[-1.0] * len(bad.response_ids)]])
    from vrag_data.train.update import _batch, _logp

    def seq_logp(rs):
        with torch.no_grad():
            b = _batch(rs, pol, "cpu")
            return [float((_logp(model, b)[i] * b["mask"][i]).sum()) for i in range(len(rs))]

    before = seq_logp(training_rows([_episode(good), _episode(bad)], [[[0.0] * len(good.response_ids)],
                                                                     [[0.0] * len(bad.response_ids)]]))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    stats = update_policy(pol, None, opt, params, rows, RlConfig(kl_coef=0.0, micro_batch_size=1))
    assert stats["tokens"] == len(good.response_ids) + len(bad.response_ids)
    after = seq_logp(rows)
    assert after[0] > before[0] and after[1] < before[1]


def test_sampler_keeps_images_and_the_stop_token(policy, workspace):
    from vrag_data.schema.records import ImageRef, Message
    from vrag_data.train.rl_env import RlEnvironment

    ws, _ = workspace
    env = RlEnvironment.open(str(ws.root), None)
    torch.manual_seed(0)
    sampler = PolicySampler(policy, env.image_loader(56 * 56, 84 * 84), 8, 1.0, 1.0)
    s = sampler.sample([Message(role="user", text="look", images=[ImageRef(page_id="acme_report_2")])])
    assert s.pixel_values is not None and int(s.image_grid_thw.prod()) == s.pixel_values.shape[0]
    assert s.context_ids.count(policy.image_token_id) == int(s.image_grid_thw.prod()) // 4
    assert 1 <= len(s.response_ids) <= 8
    eos = policy.tokenizer.eos_token_id
    assert eos not in s.response_ids[:-1]  # generation stops at <|im_end|>, which is kept to be trained on


def test_rl_export_selects_tasks(workspace, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support.train_workspace import oracle_export
    from vrag_data.errors import VragError
    from vrag_data.train.rl_env import RlEnvironment

    ws, tasks = workspace
    export = oracle_export(ws, tmp_path / "export")
    env = RlEnvironment.open(str(ws.root), str(export / "hf"))  # the HF `rl` config's train split
    rows = [r for f in (export / "hf" / "data").glob("rl-*.parquet") for r in pq.read_table(f).to_pylist()]
    infos = [json.loads(r["extra_info"]) if isinstance(r["extra_info"], str) else r["extra_info"] for r in rows]
    held_out = {i["task_id"] for i in infos if i.get("split") != "train"}
    assert len(held_out) == 1  # export.val_share: one task held out for validation, never trained on
    assert sorted(t.task_id for t in env.tasks) == sorted(t.task_id for t in tasks if t.task_id not in held_out)
    one = tmp_path / "one.parquet"
    pq.write_table(pa.table({"extra_info": [json.dumps({"task_id": tasks[1].task_id})]}), one)
    assert [t.task_id for t in RlEnvironment.open(str(ws.root), str(one)).tasks] == [tasks[1].task_id]
    pq.write_table(pa.table({"extra_info": [json.dumps({"task_id": "elsewhere"})]}), one)
    with pytest.raises(VragError, match="none of its 1 task ids"):
        RlEnvironment.open(str(ws.root), str(one))
