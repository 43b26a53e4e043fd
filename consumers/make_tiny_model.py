"""A model folder with a tokenizer and Qwen2-VL's processor config, for the consumers' own data pipelines.

No weights: LLaMA-Factory's and verl's data code load only the tokenizer and the processor. The tokenizer is the
project's tiny byte-level BPE with Qwen2-VL's special tokens (`vrag_data.train.tiny`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from transformers import Qwen2VLConfig
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from vrag_data.train.tiny import train_tokenizer


def make(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    train_tokenizer().save_pretrained(out)
    # a class name every transformers release knows (5.x writes its new backend's name, which 4.x cannot load)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    if isinstance(cfg.get("extra_special_tokens"), list):  # 4.x reads the list under its older key
        cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")
    cfg_path.write_text(json.dumps(cfg, indent=2))
    Qwen2VLImageProcessorPil().save_pretrained(out)
    Qwen2VLConfig().save_pretrained(out)
    return out


if __name__ == "__main__":
    print(make(Path(sys.argv[1])))
