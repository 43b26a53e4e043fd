"""A tiny Qwen2-VL-shaped model and a locally trained tokenizer, for CPU tests and examples.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a few kilobytes of text (any string
encodes, no unknown tokens), with Qwen2-VL's special tokens; the model is `Qwen2VLForConditionalGeneration`
with random weights built from `TinyModelConfig`. The image processor is Qwen2-VL's PIL image processor
(the combined processor class needs torchvision, which the CPU environment does not have).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from vrag_data.train.config import TinyModelConfig

IM_START, IM_END, ENDOFTEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD]

# Qwen2-VL's chat layout, kept so a saved tiny model can also be driven through `apply_chat_template`.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Seed text so every tiny tokenizer knows the agent's vocabulary even before it sees any data.
_BASE_TEXT = """
<think>I need to find the page that answers the question.</think>
<search>annual revenue by region table</search>
<select>[0, 2]</select>
<bbox>[120, 340, 560, 610]</bbox>
<region>[10, 20, 300, 400]</region>
<observe>The first image shows a bar chart of sales per year.</observe>
<evidence>[1]: revenue grew from 12.5 million in 2019 to 18.0 million in 2021.
[2]: no relevant information.</evidence>
<answer>18.0 million</answer>
<read>[{"page_ids": ["report_3"], "query": "operating margin"}]</read>
<FINISH>
The search results are shown below. No new pages were found. Please try another query.
Here is the cropped region of the page. The answer is not visible; zoom into the table.
What was the total operating income of the company in 2020 according to the report?
Question: Which segment had the highest growth? Answer the question based on the retrieved pages.
0 1 2 3 4 5 6 7 8 9 10 100 1000 2019 2020 2021 2022 2023 % $ , . ; : ! ? ( ) [ ] { } " ' - + = / *
"""


def train_tokenizer(texts: Iterable[str] = (), vocab_size: int = 640) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on the built-in agent text plus `texts`; deterministic for the same inputs."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [_BASE_TEXT, *texts]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        additional_special_tokens=SPECIAL_TOKENS[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "right"
    return fast


def make_image_processor(min_pixels: int, max_pixels: int) -> Qwen2VLImageProcessorPil:
    return Qwen2VLImageProcessorPil(min_pixels=min_pixels, max_pixels=max_pixels)


def build_tiny_model(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerFast) -> Qwen2VLForConditionalGeneration:
    """Random-weight Qwen2-VL with the given sizes; token ids of the vision markers come from `tokenizer`."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    # M-RoPE splits the rotary half-dimension into temporal / height / width sections.
    half = head_dim // 2
    section = [half - 2 * (half // 4), half // 4, half // 4]
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_hidden_layers": cfg.num_hidden_layers,
            "num_attention_heads": cfg.num_attention_heads,
            "num_key_value_heads": cfg.num_key_value_heads,
            "max_position_embeddings": cfg.max_position_embeddings,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section},
            "bos_token_id": ids[ENDOFTEXT],
            "eos_token_id": ids[IM_END],
            "pad_token_id": ids[ENDOFTEXT],
        },
        vision_config={
            "depth": cfg.vision_depth,
            "embed_dim": cfg.vision_embed_dim,
            "hidden_size": cfg.hidden_size,
            "num_heads": cfg.vision_num_heads,
            "mlp_ratio": 2,
        },
        image_token_id=ids[IMAGE_PAD],
        video_token_id=ids[VIDEO_PAD],
        vision_start_token_id=ids[VISION_START],
        vision_end_token_id=ids[VISION_END],
        tie_word_embeddings=False,
    )
    torch.manual_seed(cfg.seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids[IM_END]
    model.generation_config.pad_token_id = ids[ENDOFTEXT]
    return model
