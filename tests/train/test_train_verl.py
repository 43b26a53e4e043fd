"""verl engine, library side (no verl here): the written config, `--dry-run` through the CLI, the token stream of the
agent loop, and the shipped accelerate configs read by accelerate's own parser. verl's own classes are exercised in
consumers/check_verl_agent_loop.py (verl's environment)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")
import yaml
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.errors import VragError
from vrag_data.schema.records import Message
from vrag_data.train.config import load_train_config
from vrag_data.train.verl_config import AGENT_NAME, LOOP_TARGET, write_verl_config
from vrag_data.train.verl_episode import ContextEncoder, StreamResponder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def export(tmp_path) -> Path:
    """The parts of a verl export the launcher reads: verl/config.yaml (relative paths) and reward/compute_score.py."""
    root = tmp_path / "export"
    (root / "verl").mkdir(parents=True)
    (root / "reward").mkdir()
    (root / "reward" / "compute_score.py").write_text("")
    (root / "verl" / "config.yaml").write_text(yaml.safe_dump({"data": {
        "train_files": ["verl/train-00000.parquet"], "val_files": [], "prompt_key": "prompt", "image_key": "images",
        "max_prompt_length": 900}}))
    return root


def _dry_run(tmp_path: Path, export: Path, *extra: str):
    return CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs/train/qwen2.5-vl-7b-rl-vrag-verl.yaml"),
                                    "--engine", "verl", "--dry-run", "-w", str(tmp_path / "ws"), "--data", str(export),
                                    "-o", str(tmp_path / "out"), "--set", f"model.path={tmp_path / 'model'}", *extra])


def test_dry_run_writes_verl_config_from_the_train_config(tmp_path, export):
    res = _dry_run(tmp_path, export)
    assert res.exit_code == 0, res.output
    line = json.loads(res.output.strip().splitlines()[-1])
    assert line["command"].endswith(f"-m verl.trainer.main_ppo --config-path {tmp_path / 'out' / 'verl'} --config-name vrag_ppo")
    cfg = yaml.safe_load(Path(line["config"]).read_text())
    assert cfg["defaults"] == ["ppo_trainer", "_self_"] and cfg["hydra"]["searchpath"] == ["pkg://verl.trainer.config"]
    data, arr = cfg["data"], cfg["actor_rollout_ref"]
    assert data["train_files"] == data["val_files"] == [str(export / "verl" / "train-00000.parquet")]
    assert (data["max_prompt_length"], data["max_response_length"], data["train_batch_size"]) == (8192, 16384, 64)
    assert arr["model"]["path"] == str(tmp_path / "model")
    rollout = arr["rollout"]
    assert (rollout["name"], rollout["n"], rollout["agent"]["default_agent_loop"]) == ("vllm", 5, AGENT_NAME)
    assert arr["actor"]["strategy"] == "fsdp" and arr["actor"]["fsdp_config"]["model_dtype"] == "fp32"
    assert arr["actor"]["use_kl_loss"] and arr["actor"]["kl_loss_coef"] == 0.01 and arr["actor"]["kl_loss_type"] == "low_var_kl"
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"], cfg["trainer"]["total_training_steps"]) == (1, 8, 200)
    reward = cfg["reward"]["custom_reward_function"]
    assert reward["path"] == str(export / "reward" / "compute_score.py") and reward["name"] == "compute_score"
    assert reward["reward_kwargs"] == {"judge_url": "http://127.0.0.1:8001/v1", "judge_model": "Qwen/Qwen2.5-7B-Instruct"}
    loop = yaml.safe_load(Path(line["agent_loop"]).read_text())
    assert loop == [{"name": AGENT_NAME, "_target_": LOOP_TARGET, "train_config": str(tmp_path / "out" / "verl" / "train_config.yaml"),
                     "recipe": {"_target_": "vrag_data.recipe.registry.get_recipe", "name": "vrag_rl"}}]
    as_run = load_train_config(loop[0]["train_config"])  # the agent loop reads this one back
    assert as_run.workspace == str(tmp_path / "ws") and as_run.rl.recipe == "vrag_rl"
    assert not (tmp_path / "out" / "checkpoints").exists()  # nothing started


def test_overrides_rules_judge_and_refusals(tmp_path, export):
    res = _dry_run(tmp_path, export, "--set", "rl.judge=rules", "--set", "verl.overrides={trainer.logger: [console, wandb]}")
    assert res.exit_code == 0, res.output
    cfg = yaml.safe_load((tmp_path / "out" / "verl" / "vrag_ppo.yaml").read_text())
    assert cfg["reward"]["custom_reward_function"]["reward_kwargs"] == {"judge": "rules"}
    assert cfg["trainer"]["logger"] == ["console", "wandb"]
    for args, words in [(("--set", "rl.estimator=spo"), "bundled trainer"), (("--set", "rl.judge=null"), "rl.judge"),
                        (("--set", "model.path=null"), "model.path"), (("--set", "rl.recipe=nope"), "nope")]:
        res = _dry_run(tmp_path, export, *args)
        assert res.exit_code != 0 and words in res.output, res.output
    res = CliRunner().invoke(app, ["train", "rl", "--config", str(REPO / "configs/train/tiny-rl.yaml"), "--dry-run"])
    assert res.exit_code != 0 and "--engine verl" in res.output
    cfg = load_train_config(REPO / "configs/train/tiny-rl.yaml", ["workspace=ws"])
    with pytest.raises(VragError, match="--data EXPORT"):
        write_verl_config(cfg, None)


def _encoder():
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from PIL import Image

    from vrag_data.train.tiny import train_tokenizer

    tok = train_tokenizer()
    ip = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=56 * 56)
    return ContextEncoder(tok, ip, lambda ref: Image.new("RGB", (56, 56), "white"), "You are a helpful assistant.")


def test_stream_appends_observations_masked_and_matches_the_rerendered_context():
    from vrag_data.schema.records import ImageRef

    enc = _encoder()
    tok = enc.tokenizer
    replies = ["<search>revenue 2023</search>", "<answer>42</answer>"]
    sent: list[list[int]] = []

    async def generate(ids, images, max_tokens):
        sent.append(list(ids))
        return tok(replies[len(sent) - 1], add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")], None

    r = StreamResponder(enc, generate, max_new_tokens=64, prompt_length=4096, response_length=4096)
    ep = type("Ep", (), {"recipe": type("R", (), {"name": "t"})()})()
    first = [Message(role="user", text="What was the revenue?")]
    asyncio.run(r.ask("policy", first, ep, "policy"))
    page = ImageRef(page_id="d_1")
    second = [*first, Message(role="assistant", text=replies[0]), Message(role="user", text="page 1", images=[page])]
    asyncio.run(r.ask("policy", second, ep, "policy"))
    s = r.stream
    assert s.prompt_ids == enc.encode(first).ids
    # token in, token out: the second call sends the stream, which is the re-rendered context of its messages
    assert sent[1] == s.prompt_ids + s.response_ids[: len(sent[1]) - len(s.prompt_ids)] == enc.encode(second).ids
    n1 = len(s.calls[0][1])
    assert s.response_mask[:n1] == [1] * n1 and s.response_mask[-len(s.calls[1][1]):] == [1] * len(s.calls[1][1])
    assert set(s.response_mask[n1: -len(s.calls[1][1])]) == {0} and len(s.images) == 1 and s.segments == 1

    # a context that rewrites the history: one line, or a restart when asked for
    rewritten = [Message(role="user", text="What was the revenue? (evidence: none)")]
    with pytest.raises(VragError, match="on_rewrite"):
        asyncio.run(r.ask("policy", rewritten, ep, "policy"))
    r2 = StreamResponder(enc, generate, max_new_tokens=64, prompt_length=4096, response_length=4096, on_rewrite="last_segment")
    sent.clear()
    asyncio.run(r2.ask("policy", first, ep, "policy"))
    asyncio.run(r2.ask("policy", rewritten, ep, "policy"))
    assert r2.stream.segments == 2 and r2.stream.prompt_ids == enc.encode(rewritten).ids
    assert r2.stream.response_mask == [1] * len(r2.stream.response_ids)


def test_accelerate_configs_pass_accelerates_own_launcher_checks():
    """FSDP cannot run on these CPUs (no GPUs, gloo): accelerate's own parser and launch validation read the configs."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    fsdp = REPO / "configs/train/accelerate/fsdp-8gpu.yaml"
    c = load_config_from_file(str(fsdp))
    assert (c.distributed_type.value, c.num_processes, c.mixed_precision) == ("FSDP", 8, "bf16")
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(
        ["--config_file", str(fsdp), "-m", "vrag_data.cli.main", "train", "sft"]))
    assert args.use_fsdp and args.fsdp_version == 2 and args.fsdp_reshard_after_forward  # full shard
    assert args.fsdp_activation_checkpointing and args.fsdp_state_dict_type == "SHARDED_STATE_DICT"
    ddp = load_config_from_file(str(REPO / "configs/train/accelerate/ddp-8gpu.yaml"))
    assert ddp.distributed_type.value == "MULTI_GPU" and ddp.num_processes == 8
    # the 7B SFT config launches with the FSDP config, and does not checkpoint twice
    text = (REPO / "configs/train/qwen2.5-vl-7b-sft-vrag.yaml").read_text()
    assert "--config_file configs/train/accelerate/fsdp-8gpu.yaml" in text
    assert load_train_config(REPO / "configs/train/qwen2.5-vl-7b-sft-vrag.yaml").model.gradient_checkpointing is False
    readme = (REPO / "README.md").read_text()
    assert "configs/train/accelerate/fsdp-8gpu.yaml" in readme and "--engine verl" in readme
