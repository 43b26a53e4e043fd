"""Rollouts for the consumers' reward checks (imported by the check scripts, inside each consumer's environment).

For every RL row of an export: a right response and the same response with a wrong final answer, as a trainer
decodes a multi-turn rollout (assistant turns and the observations between them, in Qwen's chat-template form).
The right response is the export's own SFT trajectory of the row's task: every record of its first trajectory
(MM-Doc-R1 writes its search agent's and its answer agent's records apart), from the first assistant turn on, ending
in the row's own target answer (EVisRAG's target declines when the row's images miss a gold page). A row
whose task has no SFT trajectory (the RL keep-set holds tasks the SFT filter dropped) gets EVisRAG's one-turn answer
written from its tagged ground truth, or else another task's trajectory of the same export ending in this row's
answer: the answer term decides right from wrong either way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

WRONG = "zzz no such value"


def _chat(msgs: list[dict]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)


def sft_rollouts(root: Path) -> dict[str, str]:
    """task id -> the export's own SFT trajectory of that task as one response string."""
    parts: dict[tuple[str, str], list[str]] = {}
    first: dict[str, str] = {}
    for f in sorted((root / "hf" / "data").glob("sft-*.parquet")):
        for row in pq.read_table(f, columns=["task_id", "traj_id", "messages"]).to_pylist():
            msgs = row["messages"]
            i = next((k for k, m in enumerate(msgs) if m["role"] == "assistant"), None)
            if i is None:
                continue
            first.setdefault(row["task_id"], row["traj_id"])
            parts.setdefault((row["task_id"], row["traj_id"]), []).append(_chat(msgs[i:]))
    return {t: "".join(parts[(t, tr)]) for t, tr in first.items()}


def answer_of(ground_truth: str) -> str:
    """The answer a row's ground truth holds: the last <answer> of a tagged target, the JSON form's
    `ground_truth`, else the string itself."""
    gt = str(ground_truth)
    if gt.lstrip().startswith("{"):
        try:
            gt = str(json.loads(gt).get("ground_truth", gt))
        except ValueError:
            pass
    tagged = re.findall(r"<answer>(.*?)</answer>", gt, re.S)
    return tagged[-1].strip() if tagged else gt


def _with_answer(response: str, answer: str) -> str:
    i, j = response.rindex("<answer>"), response.rindex("</answer>")
    return response[: i + len("<answer>")] + answer + response[j:]


def right_and_wrong(task_id: str, ground_truth: str, sft: dict[str, str]) -> tuple[str, str, str]:
    """(right, wrong, where the right one came from: "sft" | "evidence" | "template")."""
    gt = str(ground_truth)
    if task_id in sft and "<answer>" in sft[task_id]:  # ending in the row's own target (EVisRAG's may decline)
        right, how = _with_answer(sft[task_id], answer_of(gt)), "sft"
    elif "<evidence>" in gt and "<answer>" in gt:
        evidence = gt[gt.index("<evidence>"): gt.index("</evidence>") + len("</evidence>")]
        right = f"<observe>the images</observe>\n{evidence}\n<think>the evidence answers it</think>\n<answer>{answer_of(gt)}</answer>"
        how = "evidence"
    else:
        template = next(r for r in sft.values() if "<answer>" in r)
        right, how = _with_answer(template, answer_of(gt)), "template"
    return right, _with_answer(right, WRONG), how
