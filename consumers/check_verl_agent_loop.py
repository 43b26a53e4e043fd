"""verl 0.9.1's own classes around the project's agent loop (run inside verl's environment).

    python check_verl_agent_loop.py <root> <tiny model dir>

`<root>/<recipe>/verl/` holds what `vrag-data train rl --engine verl --dry-run` wrote (vrag_ppo.yaml,
agent_loop.yaml, train_config.yaml) for a workspace built from the sample corpus; `<root>/shipped/` the same for the
shipped cluster config. Per recipe:
- verl's loader accepts the written config: Hydra composes it over verl's `ppo_trainer` defaults (struct mode: an
  unknown key fails), `verl.utils.config.validate_config` passes, and the rollout section converts to verl's
  `RolloutConfig` dataclass;
- the agent loop is built the way `AgentLoopWorker` builds it (`hydra.utils.instantiate` on the agent_loop.yaml
  entry, after `register` put `vrag_agent` in verl's registry) and runs one episode of a workspace task with a tiny
  random Qwen2-VL policy behind a `generate` shaped like verl's `LLMServerClient.generate` (token ids in, verl's
  `TokenOutput` out, images as PIL `image_data`); greedy decoding;
- the bundled trainer's rollout (`PolicyResponder` + `PolicySampler`, the same model, greedy) runs the same task; the
  loop's prompt ids are its first context, the masked-in spans are its generated tokens turn by turn, and each
  observation span is the tail of its next context (the whole stream equals that context where the context policy
  appends);
- the reward verl would compute (`get_custom_reward_fn` on the written `reward` section: the export's
  reward/compute_score.py with the judge of the train config, here the rule scorers; `extra_info` merged with the
  loop's `extra_fields` as verl's naive reward manager does) equals `score_trajectory` of the bundled rollout.
vrag-data is not installed in verl's environment: its source comes from the checkout and its own dependencies that
verl's environment lacks (bm25s, ...) from the project's environment (`VRAG_MAIN_SITE`), searched after verl's.
Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if os.environ.get("VRAG_MAIN_SITE"):
    sys.path.append(os.environ["VRAG_MAIN_SITE"])

import hydra  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoProcessor, AutoTokenizer  # noqa: E402

from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass, validate_config  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from vrag_data.rewards.recipes import score_trajectory  # noqa: E402
from vrag_data.train.config import TinyModelConfig, load_train_config  # noqa: E402
from vrag_data.train.data import image_inputs  # noqa: E402
from vrag_data.train.episode import PolicyResponder, make_deps, rollout_group  # noqa: E402
from vrag_data.train.model import Policy  # noqa: E402
from vrag_data.train.rollout import PolicySampler  # noqa: E402
from vrag_data.train.tiny import build_tiny_model  # noqa: E402


class TinyServer:
    """`LLMServerClient.generate`'s signature with a tiny model behind it (greedy, like the bundled sampler at t=0)."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.calls = policy, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None,
                       audio_data=None, mm_processor_kwargs=None, **kwargs) -> TokenOutput:
        self.calls += 1
        p, model = self.policy, self.policy.model
        ids = torch.tensor([list(prompt_ids)])
        kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "max_new_tokens": int(sampling_params["max_tokens"]),
              "do_sample": False, "pad_token_id": p.pad_id, "eos_token_id": p.tokenizer.eos_token_id}
        if image_data:
            pixel_values, grid = image_inputs(list(image_data), p.image_processor)
            kw.update(pixel_values=pixel_values, image_grid_thw=grid, mm_token_type_ids=(ids == p.image_token_id).long())
        with torch.no_grad():
            out = model.eval().generate(**kw)
        return TokenOutput(token_ids=out[0, ids.shape[1]:].tolist(), stop_reason="completed")


class ScriptedModel(torch.nn.Module):
    """A policy whose replies are fixed, canonically tokenized texts (a search for the question's first words, then the gold answer):
    the random tiny model's replies often tokenize non-canonically, after which the bundled trainer (re-tokenizing
    the reply's text) and the stream (keeping the generated ids) see different tokens; these replies let one whole
    episode, searches and page images included, be compared token for token."""

    def __init__(self, tokenizer, question: str, answer: str) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        query = " ".join(question.split()[:4])
        texts = [f"<think>find the page</think>\n<search>{query}</search>", f"<think>found</think>\n<answer>{answer}</answer>"]
        self.replies = [tokenizer(t, add_special_tokens=False)["input_ids"] + [end] for t in texts]
        self.calls = 0

    device = torch.device("cpu")
    dtype = torch.float32

    def generate(self, input_ids, max_new_tokens: int, **kwargs):
        reply = self.replies[min(self.calls, len(self.replies) - 1)][:max_new_tokens]
        self.calls += 1
        return torch.cat([input_ids, torch.tensor([reply], dtype=input_ids.dtype)], dim=1)


def compose_config(folder: Path):
    with initialize_config_dir(config_dir=str(folder.resolve()), version_base=None):
        config = compose(config_name="vrag_ppo")
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    return config


def spans(mask: list[int]) -> list[tuple[int, int]]:
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def check_recipe(folder: Path, tokenizer, processor, policy: Policy, scripted: bool = False) -> dict:
    config = compose_config(folder)
    import vrag_data.train.verl_loop  # noqa: F401  (what verl's worker imports through the entry's _target_)

    entry = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)[0]
    _agent_loop_registry[entry.name] = entry
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == entry.name
    server = TinyServer(policy)  # the scripted policy replaces the model below, once the task is known
    loop = hydra.utils.instantiate(config=_agent_loop_registry[entry.name], trainer_config=DictConfigWrap(config=config),
                                   server_manager=server, tokenizer=tokenizer, processor=processor, hf_model_type="qwen2_vl",
                                   dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))
    cfg = load_train_config(entry.train_config)
    task = loop.env.tasks[0]
    if scripted:
        policy = Policy(ScriptedModel(tokenizer, task.question, task.answer), tokenizer, processor.image_processor)
        server.policy = policy
    params = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False}
    out = asyncio.run(loop.run(params, raw_prompt=[], extra_info={"task_id": task.task_id}))

    # the bundled trainer's rollout of the same task, the same model, greedy
    sampler = PolicySampler(policy, loop.env.image_loader(loop.recipe.env.page_min_pixels, loop.recipe.env.page_max_pixels,
                                                          loop.recipe.env.page_resize),
                            cfg.rl.max_new_tokens, 0.0, 1.0, cfg.data.default_system, max_context=10**6)
    if scripted:
        policy.model.calls = 0  # the bundled side replays the same script from its start
    responder = PolicyResponder(sampler)
    bundled = rollout_group(make_deps(loop.env, loop.recipe, responder, "bundled"), responder, task, 1)[0]
    samples = bundled.samples
    stream = out.prompt_ids + out.response_ids
    trained = spans(out.response_mask)
    rewritten = out.extra_fields["segments"] > 1
    # with a rewriting context policy the stream holds the turns after the last rewrite
    kept = samples[len(samples) - len(trained):] if rewritten else samples
    assert trained and (len(trained) <= len(samples) if rewritten else len(trained) == len(samples)), (len(trained), len(samples))
    assert out.prompt_ids == kept[0].context_ids, "prompt ids = the bundled trainer's context of the same turn"
    compared = 0
    for k, ((a, b), s) in enumerate(zip(trained, kept, strict=True)):
        ctx = stream[: len(out.prompt_ids) + a]
        if ctx != s.context_ids:
            # the bundled trainer re-tokenizes earlier replies from their text; the stream keeps the generated ids.
            # Where those differ (a non-canonical tokenization), the two contexts differ only inside masked-in spans,
            # and from there on the two policies saw different tokens: nothing after it is compared.
            ops = difflib.SequenceMatcher(a=ctx, b=s.context_ids, autojunk=False).get_opcodes()
            for tag, i1, i2, _, _ in ops:
                if tag != "equal":
                    pos = range(i1 - len(out.prompt_ids), max(i2, i1 + 1) - len(out.prompt_ids))
                    assert all(0 <= i < len(out.response_mask) and out.response_mask[i] for i in pos), \
                        f"turn {k}: the contexts differ outside the generated tokens"
            break
        assert out.response_ids[a:b] == s.response_ids, f"turn {k}: generated tokens differ"
        assert set(out.response_mask[a:b]) == {1}
        if k + 1 < len(kept):
            obs = out.response_ids[b: trained[k + 1][0]]
            nxt = kept[k + 1].context_ids
            assert obs and nxt[-len(obs):] == obs, f"turn {k}: observation tokens are not the tail of the next context"
            assert set(out.response_mask[b: trained[k + 1][0]]) == {0}
        compared += 1
    assert compared >= 1
    exact = compared == len(kept)
    n_images = stream.count(tokenizer.convert_tokens_to_ids("<|vision_start|>"))
    assert n_images == len((out.multi_modal_data or {}).get("images") or []), "one image per <|vision_start|>"

    # the reward verl computes: the export's compute_score with the written reward section, extra_info + extra_fields
    reward_fn = get_custom_reward_fn(config)
    solution = tokenizer.decode(out.response_ids, skip_special_tokens=True)
    extra = {"task_id": task.task_id, "reward": loop.recipe.reward.name, "question": task.question,
             "answer_format": task.answer_format, "gold_pages": list(task.evidence_pages),
             "gold_boxes": {}, **out.extra_fields}
    got = reward_fn(data_source="vrag", solution_str=solution, ground_truth=task.answer, extra_info=extra)
    want = score_trajectory(bundled.trajectory, task, loop.recipe.reward.name).total
    if exact:  # the same episode on both sides: the same reward
        assert out.extra_fields["final_answer"] == bundled.trajectory.final_answer
        assert abs(got["score"] - want) < 1e-6, (got, want)
    return {"turns": len(samples), "trained_turns": len(trained), "segments": out.extra_fields["segments"],
            "turns_compared": compared, "same_episode": exact, "images": n_images, "server_calls": server.calls, "score": got["score"]}


def main(root: Path, tiny: Path) -> dict:
    os.environ["VRAG_REWARD_JUDGE"] = "rules"
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    processor = AutoProcessor.from_pretrained(tiny)
    model = build_tiny_model(TinyModelConfig(), tokenizer)
    policy = Policy(model, tokenizer, processor.image_processor)
    result = {}
    for folder in sorted(p for p in root.iterdir() if (p / "verl" / "vrag_ppo.yaml").is_file()):
        if folder.name == "shipped":
            compose_config(folder / "verl")
            result["shipped"] = "accepted"
            continue
        result[folder.name] = {"tiny": check_recipe(folder / "verl", tokenizer, processor, policy),
                               "scripted": check_recipe(folder / "verl", tokenizer, processor, policy, scripted=True)}
    return result


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
