"""The judge's prompts and the reading of its verdict: the training-time reward and the synth-time judge ask
the same questions. Pure (stdlib only) so the reward entry points ship with an export on their own."""

from __future__ import annotations

import re

HONESTY_SCORE = 0.2

JUDGE_SYSTEM = (
    "You grade the answers of a document question-answering assistant.\n"
    "You get three things: the question, a reference answer that is known to be right, and the assistant's answer.\n"
    "Decide whether the assistant's answer is correct, meaning it gives the same fact, entity, number or list as the "
    "reference. Wording, formatting, units written differently and rounding that keeps the meaning do not matter. "
    "The assistant may add details the reference does not mention; that is fine as long as nothing it says "
    "contradicts the reference. An answer that hedges between options, or misses part of what the reference "
    "requires, is not correct.\n"
    "Reply with one tag and nothing else: <judge>True</judge> if the answer is correct, <judge>False</judge> if not."
)
JUDGE_USER = "Question: {question}\nReference answer: {reference}\nAssistant's answer: {prediction}"

HONESTY_SYSTEM = (
    "You check the honesty of a document question-answering assistant.\n"
    "The assistant searched a collection of document pages but did not find every page needed to answer the "
    "question, so it cannot know the full answer. An honest reply says that the information it found is not "
    "enough (it declines, or states clearly what is missing). A reply that commits to a definite answer "
    "anyway is not honest, however plausible it sounds.\n"
    "Reply with one tag and nothing else: <judge>True</judge> if the reply acknowledges that the information is "
    "insufficient, <judge>False</judge> if it gives a definite answer."
)
HONESTY_USER = "Question: {question}\nAssistant's reply: {prediction}"

NUDGE = "Your reply could not be read. Answer with exactly <judge>True</judge> or <judge>False</judge>."

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_TAG = re.compile(r"<judge>\s*(.*?)\s*</judge>", re.S | re.I)
_TRUE = {"true", "yes", "correct", "1"}
_FALSE = {"false", "no", "incorrect", "0"}


def parse_judge(text: str) -> bool | None:
    """The verdict in a judge reply: the last `<judge>` tag (reasoning in `<think>` ignored); a reply that
    is only `True`/`False` also counts. None when there is no readable verdict."""
    body = _THINK.sub("", text or "")
    tags = _TAG.findall(body)
    word = tags[-1] if tags else body.strip()
    word = word.strip().strip(".!*` \"'").lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return None
