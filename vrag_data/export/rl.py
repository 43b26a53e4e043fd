"""Task -> RL records (pure): the verl/HF `RlRecord` and the EasyR1 (EVisRAG) row.

Reward contract shared with `vrag_data.rewards.verl.compute_score`: `reward_model.ground_truth` is the gold
answer string; `extra_info` = {question, answer_format, gold_pages (page ids), gold_boxes ({page_id:
[[x1, y1, x2, y2] in 0-1000]}), recipe, reward, coord_space, max_pixels, page_sizes, task_id, index, split,
shown_pages} and the rollout keys (`ROLLOUT_KEYS`: search_results, selections, read_pages), written empty: the agent
loop fills them at rollout time, and a reward refuses a row that lacks a key it reads rather than defaulting it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from vrag_data.ids import split_page_id
from vrag_data.inert import sanitize_text
from vrag_data.rewards.answer import INSUFFICIENT
from vrag_data.rewards.format import evidence_map
from vrag_data.rewards.verl import ROLLOUT_KEYS
from vrag_data.schema.records import RewardModel, RlRecord, Task

# VRAG-RL's reward dispatch knows only these data sources; benchmarks map onto them (configurable).
VRAG_DATA_SOURCES = ("rag", "slidevqa_test", "mmlongdoc", "vidoseek")
DEFAULT_DATA_SOURCE_MAP = {
    "slidevqa": "slidevqa_test",
    "mmlongbench": "mmlongdoc",
    "mmlongbench-doc": "mmlongdoc",
    "mmlongdoc": "mmlongdoc",
    "vidoseek": "vidoseek",
}
NO_EVIDENCE = "no relevant information"


def empty_rollout_keys() -> dict[str, list[Any]]:
    """The `extra_info` keys a rollout fills (`ROLLOUT_KEYS`: what the agent searched, selected, read) of a row no
    rollout has filled yet: every row carries them, empty until the agent loop's extra_fields replace them."""
    return {k: [] for k in ROLLOUT_KEYS}


def data_source_for(benchmark: str, mapping: dict[str, str] | None = None, default: str = "rag") -> str:
    m = {**DEFAULT_DATA_SOURCE_MAP, **(mapping or {})}
    key = (benchmark or "").strip().lower()
    return m.get(key, default)


def gold_boxes(task: Task) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for eb in task.evidence_boxes:
        out.setdefault(eb.page_id, []).append([int(v) for v in eb.box.norm])
    return out


def vrag_file_fields(task: Task) -> tuple[str, list[int]]:
    """VRAG-RL's top-level `file_name` ("<stem>.pdf") and `reference_page` (1-based pages of that file)."""
    pages = task.evidence_pages
    stem = split_page_id(pages[0])[0] if pages else (task.doc_stems[0] if task.doc_stems else "")
    ref = [split_page_id(p)[1] for p in pages if split_page_id(p)[0] == stem]
    return (f"{stem}.pdf" if stem else ""), ref


def task_to_rl(
    task: Task,
    prompt: list[dict[str, str]],
    images: list[str],
    recipe: str,
    index: int,
    data_source: str,
    ability: str = "fact-reasoning",
    shown_pages: list[str] | None = None,
    reward: str | None = None,
    coord_space: str = "qwen3-vl",
    max_pixels: int = 0,
    page_sizes: dict[str, tuple[int, int]] | None = None,
) -> RlRecord:
    file_name, reference_page = vrag_file_fields(task)
    extra: dict[str, Any] = {
        "question": task.question,
        "answer": task.answer,  # VRAG-RL's trainer reads extra_info["answer"]
        "answer_format": task.answer_format or "",
        "gold_pages": list(task.evidence_pages),
        "gold_boxes": gold_boxes(task),
        "recipe": recipe,
        "reward": reward or recipe,  # the reward `vrag_data.rewards` scores this row with
        # how the policy writes boxes in this row (the exported model family) and what converting them needs:
        # the reward reads a <bbox> the policy wrote in this space, against gold boxes in 0-1000
        "coord_space": coord_space,
        "max_pixels": int(max_pixels),
        "page_sizes": {p: list(map(int, wh)) for p, wh in (page_sizes or {}).items()},
        "task_id": task.task_id,
        "index": index,
        "split": task.split,
        "shown_pages": list(shown_pages or []),  # page ids of the prompt's images, in order (EVisRAG rewards)
        **empty_rollout_keys(),
    }
    return RlRecord(
        id=f"{task.task_id}:{recipe}",
        data_source=data_source,
        prompt=prompt,
        images=images,
        ability=ability,
        reward_model=RewardModel(style="rule", ground_truth=task.answer),
        extra_info=extra,
        file_name=file_name,
        reference_page=reference_page,
    )


def evidence_ground_truth(task: Task, image_pages: list[str], model_evidence: list[str] | None = None) -> str:
    """EVisRAG ground truth: one `[i]: ...` line per image (1-indexed) inside `<evidence>`, then `<answer>`: the
    task's answer when every gold page is among the images, else "insufficient to answer" (the target the paper
    trains for an insufficient context; a reward that sees only the response and this text scores it right).

    A gold page's line is the trajectory's own evidence line for that image when it has one, else the text of
    the task's evidence boxes on that page, else a pointer to the answer; other pages get "no relevant information".
    """
    by_page: dict[str, list[str]] = {}
    for eb in task.evidence_boxes:
        if eb.text.strip():
            by_page.setdefault(eb.page_id, []).append(" ".join(eb.text.split()))
    gold = set(task.evidence_pages)
    mine = evidence_map(model_evidence or [])
    lines = []
    for i, pid in enumerate(image_pages, start=1):
        own = sanitize_text(mine.get(i, "")).strip()  # a model's line is a field: no tag of any kind inside it
        own = "" if own.lower().rstrip(".") == NO_EVIDENCE else own
        if pid in gold:
            text = own or "; ".join(by_page.get(pid, [])) or f"this page supports the answer: {task.answer}"
        else:
            text = NO_EVIDENCE
        lines.append(f"[{i}]: {text}")
    sufficient = bool(gold) and gold <= set(image_pages)
    answer = task.answer if sufficient else INSUFFICIENT
    return "<evidence>\n" + "\n".join(lines) + "\n</evidence>\n<answer>" + answer + "</answer>"


TEMPLATE_TOKENS = 128  # what a chat template adds around a prompt (generously)


class PromptBudget:
    """The longest prompt of an export in tokens, as a trainer's length filter counts it: text at 1 token per 2 UTF-8
    bytes (an upper bound for BPE tokenizers on English and CJK text alike; the exporter does not know the model's
    tokenizer) plus each image's visual tokens at its written size (Qwen-VL: one per 28x28 patch) plus the chat
    template's own tokens (roles, default system prompt, vision markers).
    `length()` rounds it up to a multiple of 1024 (at least 1024): the trainer's `max_prompt_length`."""

    def __init__(self, out_root: Path) -> None:
        self.out_root = out_root
        self.max_tokens = 0
        self.max_pixels = 0
        self._tokens: dict[str, int] = {}

    def _image_tokens(self, rel: str) -> int:
        n = self._tokens.get(rel)
        if n is None:
            with Image.open(self.out_root / rel) as img:  # reads the header only
                w, h = img.size
            self.max_pixels = max(self.max_pixels, w * h)
            n = self._tokens[rel] = -(-w // 28) * -(-h // 28)
        return n

    def add(self, text: str, images: list[str]) -> None:
        """`images`: paths relative to the export folder."""
        self.max_tokens = max(self.max_tokens, TEMPLATE_TOKENS + len(text.encode()) // 2 + sum(self._image_tokens(p) for p in images))

    def length(self) -> int:
        return max(1024, -(-self.max_tokens // 1024) * 1024)
