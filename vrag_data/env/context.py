"""Context policies: turn (prompt messages + turns so far + environment state) into the messages sent to
the model. `AppendOnly` replays the whole history; `VisorContext` rebuilds the context every turn the way
VISOR does (evidence space pinned at the top, a sliding window of the last W turns, the question restated
in every observation, crop evaluation/correction prompts, a verification hint, a no-image prompt and the
forced-answer prompt). The stored trajectory always keeps the plain observations; only the request differs.
"""

from __future__ import annotations

import re
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from vrag_data.env.state import EnvState
from vrag_data.schema.records import Message, Observation, Turn


class ContextPolicy(Protocol):
    def build(self, prompt: list[Message], turns: list[Turn], state: EnvState) -> list[Message]: ...


def _obs_message(obs: Observation, text: str | None = None) -> Message:
    return Message(role="user", text=obs.text if text is None else text, images=list(obs.images))


class AppendOnly:
    """The full history: prompt, then every assistant message and its observation."""

    name = "append_only"

    def build(self, prompt: list[Message], turns: list[Turn], state: EnvState) -> list[Message]:
        out = list(prompt)
        for t in turns:
            out.append(Message(role="assistant", text=t.assistant))
            if t.observation is not None:
                out.append(_obs_message(t.observation))
        return out


class VisorPrompts(BaseModel):
    """VISOR's prompt pieces, written for this project. `{question}` and `{evidence}` are filled in."""

    model_config = ConfigDict(extra="forbid")
    evidence_header: str = "Evidence collected so far (notes you wrote on each page you have seen):\n{evidence}"
    evidence_empty: str = "(nothing yet)"
    intent: str = (
        "Keep the question in mind: {question}\n"
        "Check the new content against the evidence collected so far, and write everything on this page that "
        "could help inside <think> before your next action."
    )
    crop_evaluation: str = (
        "Only if a detail you need is too small or blurry to read on this page, zoom in with <bbox>[x1, y1, x2, y2]</bbox>; "
        "if the page is already legible, do not crop."
    )
    crop_correction: str = (
        "This is the zoomed-in region. Your next action must be <search> or <answer>, not another crop. "
        "If the region turned out not to help, go back to what you concluded before cropping."
    )
    verification: str = (
        "This looks like your verification search. If this page agrees with your evidence, give the final "
        "<answer> now; keep searching only if it clearly contradicts what you found."
    )
    no_image: str = (
        "There are no new pages for this search: every result was already shown. Answer from the evidence "
        "collected so far.\n{evidence}"
    )
    forced_answer: str = (
        "No turns are left. Give your final answer now inside <answer>...</answer>, using the evidence below.\n{evidence}"
    )


_VERIFY = re.compile(r"\b(verif\w*|confirm\w*|double[- ]check\w*|cross[- ]check\w*)\b", re.IGNORECASE)


class VisorContext:
    """Evidence space + sliding window (W turns) + intent injection + VISOR's observation prompts."""

    name = "evidence_window"

    def __init__(self, window: int = 2, prompts: VisorPrompts | None = None) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.prompts = prompts or VisorPrompts()

    def evidence_block(self, state: EnvState) -> str:
        lines = state.evidence_space()
        body = "\n".join(f"- {x}" for x in lines) if lines else self.prompts.evidence_empty
        return self.prompts.evidence_header.format(evidence=body)

    def build(self, prompt: list[Message], turns: list[Turn], state: EnvState) -> list[Message]:
        out = list(prompt)
        evidence = self.evidence_block(state)
        if out and out[-1].role == "user":  # pin the evidence space under the question
            last = out[-1]
            out[-1] = last.model_copy(update={"text": f"{last.text}\n\n{evidence}"})
        else:
            out.append(Message(role="user", text=evidence))
        window = turns[-self.window :]
        for i, t in enumerate(window):
            out.append(Message(role="assistant", text=t.assistant))
            if t.observation is not None:
                is_last = i == len(window) - 1
                out.append(_obs_message(t.observation, self._decorate(t, state, evidence, is_last)))
        return out

    def _decorate(self, turn: Turn, state: EnvState, evidence: str, is_last: bool) -> str:
        p, obs = self.prompts, turn.observation
        assert obs is not None
        intent = p.intent.format(question=state.question)
        text = obs.text
        if is_last and state.forced and state.forced_text and text.endswith(state.forced_text):
            text = text[: -len(state.forced_text)].rstrip()  # replaced by the evidence-grounded version below
        parts = [text] if text else []
        if obs.kind in ("search", "select") and obs.images:
            parts.append(intent)
            if _VERIFY.search(turn.action.thought) and state.evidence:
                parts.append(p.verification)
            else:
                parts.append(p.crop_evaluation)
        elif obs.kind == "crop":
            parts += [p.crop_correction, intent]
        elif obs.kind == "info" and not obs.images and turn.action.kind == "search":
            parts = [p.no_image.format(evidence=evidence), intent]
        else:
            parts.append(intent)
        if is_last and state.forced:
            parts.append(p.forced_answer.format(evidence=evidence))
        return "\n\n".join(x for x in parts if x)
