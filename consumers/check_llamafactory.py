"""Run LLaMA-Factory's own argument parser and SFT data pipeline on an export (run inside its environment).

    python check_llamafactory.py <export root> <tiny model dir>     (current directory: the export root)

The shipped yaml is read as written; its header must name every key a user sets for a run (model, DeepSpeed file,
GPUs, bf16, output_dir), and every path it names resolves from the export root (`dataset_dir`, `media_dir`, and the
DeepSpeed ZeRO file shipped beside it). Only the keys that name the machine are then replaced: the model (a
weightless tiny tokenizer + Qwen2-VL processor folder), `output_dir`, `deepspeed` (the deepspeed package needs GPUs;
its file was read above) and `bf16` (CPU). The data keys (`dataset_dir`, `media_dir`, `dataset`, `template`,
`cutoff_len`, ...) stay as shipped, relative to the export root. Every record must come out with one image-token span per image and with every assistant turn labelled and
every other token masked. The tasks whose questions the decoded training sequences hold are reported (`splits`):
the test asserts none is a held-out test task. Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "stubs"))  # torchaudio: import-only stand-in

from llamafactory.data import get_dataset, get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.extras.constants import IGNORE_INDEX  # noqa: E402
from llamafactory.hparams import get_train_args  # noqa: E402
from llamafactory.model import load_tokenizer  # noqa: E402

import splits  # noqa: E402


USER_KEYS = ("model_name_or_path", "deepspeed", "NPROC_PER_NODE", "bf16", "output_dir")


def spans(labels: list[int]) -> int:
    """Number of contiguous labelled runs."""
    n, prev = 0, False
    for v in labels:
        cur = v != IGNORE_INDEX
        n += cur and not prev
        prev = cur
    return n


def check(root: Path, model_dir: Path) -> dict:
    os.chdir(root)
    yamls = sorted((root / "llamafactory").glob("*.yaml"))
    assert yamls, f"{root}: no LLaMA-Factory yaml"
    text = yamls[0].read_text()
    args = yaml.safe_load(text)
    head = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    for key in USER_KEYS:
        assert key in head, f"{yamls[0].name} does not name {key} in its header"
    # every path the yaml names resolves from the export folder, the DeepSpeed file included
    assert (root / args["dataset_dir"] / "dataset_info.json").is_file() and (root / args["media_dir"]).is_dir()
    ds = json.loads((root / args["deepspeed"]).read_text())
    assert ds["zero_optimization"]["stage"] in (0, 1, 2, 3) and ds["train_micro_batch_size_per_gpu"] == "auto", ds
    out = tempfile.mkdtemp(prefix="lf-out-")
    args.update(model_name_or_path=str(model_dir), output_dir=out, bf16=False, report_to="none",
                preprocessing_num_workers=None, overwrite_cache=True)
    args_deepspeed = args.pop("deepspeed")  # resolved above; LLaMA-Factory would need the deepspeed package and GPUs
    model_args, data_args, training_args, _, _ = get_train_args(args)
    tok_mod = load_tokenizer(model_args)
    tokenizer, processor = tok_mod["tokenizer"], tok_mod["processor"]
    assert processor is not None, "LLaMA-Factory loaded no processor"
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    ds = get_dataset(template, model_args, data_args, training_args, stage="sft", **tok_mod)["train_dataset"]
    info = json.loads((root / data_args.dataset_dir / "dataset_info.json").read_text())
    raw = [r for f in sorted((root / data_args.dataset_dir / info[data_args.dataset[0]]["file_name"]).glob("*.json"))
           for r in json.loads(f.read_text())]
    assert len(ds) == len(raw), f"LLaMA-Factory kept {len(ds)} of {len(raw)} records"
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    vstart = tokenizer.convert_tokens_to_ids("<|vision_start|>")
    for rec, ex in zip(raw, ds):
        ids, labels = ex["input_ids"], ex["labels"]
        n_assistant = sum(1 for m in rec["messages"] if m["role"] == "assistant")
        assert spans(labels) == n_assistant, f"{rec['id']}: {spans(labels)} labelled spans, {n_assistant} assistant turns"
        assert ids.count(vstart) == len(rec["images"]), f"{rec['id']}: {ids.count(vstart)} image spans, {len(rec['images'])} images"
        assert all(labels[i] == IGNORE_INDEX for i, t in enumerate(ids) if t == pad), f"{rec['id']}: image tokens labelled"
    held = splits.load()
    found = [splits.tasks_in(tokenizer.decode(ex["input_ids"]), held) for ex in ds] if held else []
    return {"consumer": "llamafactory", "records": len(ds), "splits": splits.report(found, held), "template": data_args.template,
            "images": sum(len(r["images"]) for r in raw), "config": f"llamafactory/{yamls[0].name}",
            "deepspeed": args_deepspeed}


if __name__ == "__main__":
    print(json.dumps(check(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())))
