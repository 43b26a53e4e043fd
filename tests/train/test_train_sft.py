"""SFT: Qwen2-VL inputs (chat layout, image grid placeholders, assistant-only labels), overfitting, resume, CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the train extra (pip install -e '.[train]'); the Python 3.12/3.13 checks run without it")
from typer.testing import CliRunner

from tests.support.train_workspace import QA, build_workspace, oracle_export
from vrag_data.train.config import DataConfig, ModelConfig, SftConfig, TinyModelConfig, TrainConfig
from vrag_data.train.data import IGNORE, SftExample, collate, encode_example, load_sft_examples
from vrag_data.train.model import load_policy
from vrag_data.train.tiny import IM_END, IMAGE_PAD, VISION_END, VISION_START


@pytest.fixture(scope="module")
def real_export(tmp_path_factory) -> Path:
    """sample workspace -> oracle episodes (vrag_rl recipe, real environment and BM25) -> `vrag-data export`."""
    root = tmp_path_factory.mktemp("sft-real")
    ws, _ = build_workspace(root / "ws", size=(84, 56))
    return oracle_export(ws, root / "export")


@pytest.fixture(scope="module")
def policy(export):
    ex, _ = load_sft_examples(export)
    return load_policy(ModelConfig(tiny=TinyModelConfig(), min_pixels=56 * 56, max_pixels=112 * 112),
                       [t for e in ex for _, t in e.messages])


def _cfg(export: Path, out: Path, tiny: TinyModelConfig | None = None, **sft) -> TrainConfig:
    return TrainConfig(
        model=ModelConfig(tiny=tiny or TinyModelConfig(), min_pixels=56 * 56, max_pixels=84 * 84),
        data=DataConfig(path=str(export), cutoff_len=1024),
        sft=SftConfig(**{"per_device_batch_size": 2, "learning_rate": 1e-2, "warmup_ratio": 0.0,
                         "save_steps": 1000, **sft}),
        output_dir=str(out),
    )


def test_real_export_loads_in_every_layout(real_export):
    lf, errors = load_sft_examples(real_export)  # export root -> its LLaMA-Factory part
    assert errors == [] and len(lf) == len(QA)
    hf, errors = load_sft_examples(real_export / "hf")  # HF split with embedded image bytes
    assert errors == [] and len(hf) == len(QA)
    key = lambda e: e.messages  # noqa: E731
    assert sorted(map(key, lf)) == sorted(map(key, hf))
    assert all(len(e.images) == sum(t.count("<image>") for _, t in e.messages) >= 1 for e in lf)


def test_labels_are_masked_exactly_off_the_assistant_turns(real_export, policy):
    ex, errors = load_sft_examples(real_export)
    assert errors == [] and len(ex) == len(QA)
    tok = policy.tokenizer
    enc = encode_example(ex[0], tok, policy.image_processor, cutoff_len=4096)
    assert len(enc.input_ids) == len(enc.labels)
    # token by token: a label is either -100 or the token itself
    for i, (t, lab) in enumerate(zip(enc.input_ids, enc.labels)):
        assert lab in (IGNORE, t), i
    # the trained runs, decoded, are exactly the assistant contents each closed by <|im_end|>
    runs, cur = [], []
    for t, lab in zip(enc.input_ids, enc.labels):
        if lab == IGNORE:
            if cur:
                runs.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        runs.append(cur)
    decoded = [tok.decode(r, skip_special_tokens=False) for r in runs]
    assistant = [text for role, text in ex[0].messages if role == "assistant"]
    assert decoded == [a + IM_END for a in assistant]
    # everything else (system, question, observation with its image, role headers) is masked
    masked = tok.decode([t for t, lab in zip(enc.input_ids, enc.labels) if lab == IGNORE], skip_special_tokens=False)
    rest = masked.replace(VISION_START, "").replace(VISION_END, "").replace(IMAGE_PAD, "")
    for role, text in ex[0].messages:
        if role != "assistant":  # system prompt, question and observations are all in the masked part
            piece = f"<|im_start|>{role}\n" + text.replace("<image>", "") + IM_END
            assert piece in rest
            rest = rest.replace(piece, "", 1)
    # what is left masked: only the assistant headers and the newlines after each <|im_end|>
    assert rest.replace("<|im_start|>assistant\n", "").strip("\n") == ""
    assert masked.count("<|im_start|>assistant\n") == len(assistant)


def test_image_placeholders_match_the_image_grid(export, policy):
    ex, _ = load_sft_examples(export)
    enc = encode_example(ex[0], policy.tokenizer, policy.image_processor, cutoff_len=4096)
    pad = policy.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    t, h, w = enc.image_grid_thw[0].tolist()
    assert enc.input_ids.count(pad) == t * h * w // 4  # one placeholder per 2x2 merged patch
    assert enc.pixel_values.shape[0] == t * h * w
    start = enc.input_ids.index(policy.tokenizer.convert_tokens_to_ids(VISION_START))
    assert enc.input_ids[start + 1 + t * h * w // 4] == policy.tokenizer.convert_tokens_to_ids(VISION_END)
    batch = collate([enc, enc], policy.pad_id, policy.image_token_id)
    assert int(batch["mm_token_type_ids"].sum()) == 2 * (t * h * w // 4)
    out = policy.model(**batch)  # the model accepts it: features and placeholders agree
    assert out.loss is not None and float(out.loss.detach()) > 0


def test_cutoff_never_splits_an_image(export, policy):
    ex, _ = load_sft_examples(export)
    full = encode_example(ex[0], policy.tokenizer, policy.image_processor, cutoff_len=4096)
    start = full.input_ids.index(policy.tokenizer.convert_tokens_to_ids(VISION_START))
    cut = encode_example(ex[0], policy.tokenizer, policy.image_processor, cutoff_len=start + 3)
    assert cut.truncated and len(cut.input_ids) == start  # cut before the image, image dropped
    assert cut.pixel_values is None and cut.image_grid_thw is None
    short = encode_example(ex[0], policy.tokenizer, policy.image_processor, cutoff_len=len(full.input_ids) - 2)
    assert short.image_grid_thw is not None and len(short.input_ids) == len(full.input_ids) - 2


def test_bad_records_are_reported_and_skipped(tmp_path, export):
    rows = json.loads((export / "vrag_sft.json").read_text())
    bad = [
        {"messages": [{"role": "user", "content": "<image> hi"}, {"role": "assistant", "content": "x"}], "images": []},
        {"messages": [{"role": "user", "content": "hi"}], "images": []},
        {"messages": [{"role": "user", "content": "<image>"}, {"role": "assistant", "content": "y"}],
         "images": ["images/missing.jpg"]},
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}], "images": []},
    ]
    shutil.copytree(export / "images", tmp_path / "images")
    (tmp_path / "data.json").write_text(json.dumps(rows[:1] + bad))
    ex, errors = load_sft_examples(tmp_path / "data.json")
    assert len(ex) == 2  # the good record and the sharegpt from/value one
    assert ex[1].messages == [("user", "q"), ("assistant", "a")]
    assert len(errors) == 3
    assert "1 <image> tags but 0 images" in errors[0] and "data.json#1" in errors[0]
    assert "no assistant turn" in errors[1]
    assert "missing" in errors[2]


@pytest.mark.slow
def test_sft_overfits_four_samples(real_export, tmp_path):
    from vrag_data.train.sft import run_sft

    result = run_sft(_cfg(real_export, tmp_path / "out", max_steps=12, lr_scheduler="constant",
                          per_device_batch_size=4))
    assert result.global_step == 12 and result.n_examples == 4
    # one batch = all 4 samples, so every step sees the same data: the loss must fall well below the start
    first = result.losses[0][1]
    last = sum(loss for _, loss in result.losses[-3:]) / 3
    assert last < 0.65 * first, result.losses
    final = tmp_path / "out" / "final"
    assert (final / "config.json").is_file() and (final / "tokenizer.json").is_file()
    assert (final / "preprocessor_config.json").is_file()
    # the saved model reloads as a pretrained folder and still encodes the data identically
    reloaded = load_policy(ModelConfig(path=str(final), min_pixels=56 * 56, max_pixels=84 * 84))
    ex, _ = load_sft_examples(real_export)
    a = encode_example(ex[0], reloaded.tokenizer, reloaded.image_processor, 512)
    assert a.input_ids.count(reloaded.image_token_id) > 0
    # vision tower and projector stayed frozen (papers' SFT tables)
    assert all(not p.requires_grad for p in reloaded.model.model.visual.parameters())


def test_checkpoint_resume_continues_from_the_saved_step(export, tmp_path):
    from vrag_data.train.sft import run_sft

    # one batch = the whole data set, so the loss does not depend on the shuffle order, only on the weights
    full = run_sft(_cfg(export, tmp_path / "a", max_steps=4, save_steps=2, per_device_batch_size=4))
    assert (tmp_path / "a" / "checkpoint-2").is_dir()
    # a crashed run: only the step-2 checkpoint survived
    (tmp_path / "b").mkdir()
    shutil.copytree(tmp_path / "a" / "checkpoint-2", tmp_path / "b" / "checkpoint-2")
    resumed = run_sft(_cfg(export, tmp_path / "b", max_steps=4, save_steps=2, per_device_batch_size=4))
    assert resumed.resumed_from and resumed.resumed_from.endswith("checkpoint-2")
    assert resumed.global_step == 4
    assert [s for s, _ in resumed.losses] == [3, 4]  # steps 1-2 were not trained again
    for (s1, l1), (s2, l2) in zip(full.losses[2:], resumed.losses):
        assert s1 == s2 and l1 == pytest.approx(l2, rel=1e-4)  # same data order and weights as the uninterrupted run


def test_cli_train_sft(export, tmp_path):
    from vrag_data.cli.main import app

    cfg = Path(__file__).resolve().parents[2] / "configs" / "train" / "tiny-sft.yaml"
    r = CliRunner().invoke(app, ["train", "sft", "--config", str(cfg), "--data", str(export),
                                 "--max-steps", "2", "--output", str(tmp_path / "cli")])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 2 and summary["examples"] == 4 and not summary["nothing_to_do"]
    steps = [x for x in r.stderr.splitlines() if x.startswith("train sft (steps): ")]  # not a terminal: lines
    assert steps and steps[-1].startswith("train sft (steps): 2/2 (100%)") and "loss " in steps[-1], r.stderr
    # the same command on the finished output: nothing to do, and nothing changes on disk
    out = tmp_path / "cli"
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = CliRunner().invoke(app, ["train", "sft", "--config", str(cfg), "--data", str(export),
                                     "--max-steps", "2", "--output", str(out)])
    assert again.exit_code == 0 and "nothing to do" in again.output
    assert json.loads(again.stdout.strip().splitlines()[-1])["nothing_to_do"] is True
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    bad = CliRunner().invoke(app, ["train", "sft", "--config", str(cfg), "--data", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "SFT data not found" in bad.output


def test_unknown_config_key_is_one_line_error(tmp_path):
    from vrag_data.cli.main import app

    p = tmp_path / "bad.yaml"
    p.write_text("sft:\n  learning_rat: 1e-5\n")
    r = CliRunner().invoke(app, ["train", "sft", "--config", str(p)])
    assert r.exit_code == 2 and "sft.learning_rat" in r.output and "Traceback" not in r.output


def test_example_dataclass_paths_are_absolute(export):
    ex, _ = load_sft_examples(export / "vrag_sft.json")
    assert isinstance(ex[0], SftExample) and all(p.is_absolute() and p.is_file() for p in ex[0].images)
