"""The recipe pieces an RL rollout needs, taken from `pipelines.<recipe>` when it provides them.

Synthesis and training must see the same prompts, environment settings and context policy; this adapter
asks the recipe module first and only falls back to a minimal prompt (written here) when a recipe does not
expose one, so RL still runs on a bare environment.
"""

from __future__ import annotations

import importlib
from typing import Any

from vrag_data.schema.records import Message
from vrag_data.train.episode import RecipeBits

_FALLBACK_INSTRUCTIONS = {
    "vrag_rl": "Think inside <think></think>. To look for pages write <search>query</search>; to zoom into the "
    "last page write <bbox>[x1, y1, x2, y2]</bbox>; when you know the answer write <answer>...</answer>. "
    "One action per reply.",
    "unidoc_rl": "Think inside <think></think>, then one action: <search>query</search>, <select>[numbers]</select>, "
    "<bbox>[x1, y1, x2, y2]</bbox> or <answer>...</answer>.",
    "visor": "Think inside <think></think>, then one action: <search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> "
    "or <answer>...</answer>.",
    "evisrag": "Describe each image inside <observe></observe>, list evidence per image as [i]: ... inside "
    "<evidence></evidence>, reason inside <think></think>, and answer inside <answer></answer>.",
    "mmdoc_r1": "Search the document with <search>[\"keyword\", ...]</search>, read pages with "
    "<read>[{\"page_ids\": [...], \"query\": \"...\"}]</read>, and finish with <answer>...</answer>.",
}


class _AppendOnly:
    def build(self, prompt: list[Message], turns: list[Any], state: Any) -> list[Message]:
        out = list(prompt)
        for t in turns:
            out.append(Message(role="assistant", text=t.assistant))
            if t.observation is not None:
                out.append(Message(role="user", text=t.observation.text, images=list(t.observation.images)))
        return out


def _fallback_prompt(recipe: str):
    def build(task: Any) -> list[Message]:
        return [
            Message(role="system", text=_FALLBACK_INSTRUCTIONS.get(recipe, _FALLBACK_INSTRUCTIONS["vrag_rl"])),
            Message(role="user", text=f"Question: {task.question}"),
        ]

    return build


def recipe_bits(recipe: str, max_turns: int) -> RecipeBits:
    from vrag_data.env.settings import EnvSettings

    grammar = recipe if recipe in _FALLBACK_INSTRUCTIONS else "json"
    settings: Any = None
    prompt = None
    context: Any = None
    try:
        mod = importlib.import_module(f"pipelines.{recipe}")
    except ModuleNotFoundError:
        mod = None
    r = getattr(mod, "RECIPE", None) or (getattr(mod, "recipe", None)() if callable(getattr(mod, "recipe", None)) else None)
    if r is not None:
        grammar = getattr(r, "grammar", grammar)
        settings = getattr(r, "env_settings", None) or getattr(r, "settings", None)
        if callable(settings):
            settings = settings()
        for name in ("initial_messages", "prompt_messages", "build_prompt"):
            if callable(getattr(r, name, None)):
                prompt = getattr(r, name)
                break
        ctx = getattr(r, "context_policy", None) or getattr(r, "context", None)
        context = ctx() if isinstance(ctx, type) or (callable(ctx) and not hasattr(ctx, "build")) else ctx
    if settings is None:
        settings = EnvSettings(grammar=grammar)
    settings = settings.model_copy(update={"max_turns": max_turns})
    if context is None:
        try:
            from vrag_data.env.context import AppendOnly

            context = AppendOnly()
        except ImportError:
            context = _AppendOnly()
    return RecipeBits(recipe, grammar, settings, prompt or _fallback_prompt(recipe), context)
