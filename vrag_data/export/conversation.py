"""Trajectory -> chat turns for SFT (pure; images stay `ImageRef`s until the runner materialises them).

Rules every SFT trainer we target checks (LLaMA-Factory's sharegpt converter and multimodal plugin):
the system prompt lives apart from the turns; turns alternate user/assistant starting with user and ending
with assistant; the number of `<image>` tokens over all turns equals the number of images, in order.
Observations become user turns carrying one `<image>` per image shown. Consecutive same-role turns are
merged; trailing user turns (an observation nobody answered) are dropped since they train nothing.

A trajectory played by several agents (a seeker, then an answer agent with a prompt of its own) records each
other agent's prompt in `extra["role_prompts"]` ({turn role: messages}); `trajectory_conversations` makes one
conversation per agent, so no agent's reply is glued onto another's under a prompt it never saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vrag_data.env.geometry import _BOX_RE, family_to_raw, raw_to_family
from vrag_data.env.grammar import Grammar
from vrag_data.export.targets import render_target
from vrag_data.schema.extra_keys import ROLE_PROMPTS as ROLE_PROMPTS_KEY
from vrag_data.schema.records import ChatTurn, ImageRef, Message, Trajectory, Turn

IMAGE_TOKEN = "<image>"
# Media tokens the trainers count; literal occurrences in page text or model output must not be counted.
_MEDIA_TOKENS = ("<image>", "<video>", "<audio>")


class AlternationError(ValueError):
    """The turns cannot be brought into strict user/assistant alternation."""


@dataclass
class Conversation:
    system: str
    turns: list[ChatTurn]
    images: list[ImageRef]
    boxes_converted: int = 0
    boxes_unconverted: int = 0
    targets_rendered: int = 0  # assistant turns rendered from their parse (an export passes the recipe's grammar)
    targets_changed: int = 0  # of which the target differs from the stored reply beyond whitespace
    notes: list[str] = field(default_factory=list)


def escape_media_tokens(text: str) -> str:
    for tok in _MEDIA_TOKENS:
        text = text.replace(tok, "[" + tok[1:-1] + "]")
    return text


def with_placeholders(text: str, n_images: int, author_placed: bool = False) -> str:
    """Text carrying exactly `n_images` `<image>` tokens. A prompt author may place them (`author_placed`:
    kept when there are exactly that many); anything else (observations quote page text, which may contain
    a literal `<image>`) is escaped and the placeholders go first."""
    if author_placed and n_images and text.count(IMAGE_TOKEN) == n_images and "<video>" not in text and "<audio>" not in text:
        return text
    text = escape_media_tokens(text)
    if not n_images:
        return text
    return IMAGE_TOKEN * n_images + ("\n" + text if text else "")


PageSize = Callable[[str], tuple[int, int]]


def convert_turn_boxes(
    turn: Turn, traj: Trajectory, family: str, max_pixels: int, page_size: PageSize | None
) -> tuple[str, int, int]:
    """The assistant text with its crop boxes rewritten in `family` coordinates; (text, converted, unconverted)."""
    text, action = turn.assistant, turn.action
    if action.kind != "crop" or not action.boxes or page_size is None:
        return text, 0, 0
    src_space = str(traj.extra.get("coord_space") or "")
    src_max = int(traj.extra.get("coord_max_pixels") or max_pixels)
    if src_space == family and (family == "qwen3-vl" or src_max == max_pixels):
        return text, 0, 0
    crops = [c for c in traj.crops if c.turn == turn.idx]
    done = missing = 0
    cursor = 0
    for i, old in enumerate(action.boxes):
        page_id = (action.page_ids[i] if i < len(action.page_ids) else action.page_ids[0]) if action.page_ids else (
            crops[i].page_id if i < len(crops) else (crops[0].page_id if crops else "")
        )
        if not page_id or len(old) != 4:
            missing += 1
            continue
        try:
            w, h = page_size(page_id)
        except KeyError:
            missing += 1
            continue
        if src_space:
            raw = family_to_raw(old, w, h, src_space, src_max)
        elif i < len(crops):  # no recorded space: trust the stored crop box (raw pixels)
            raw = crops[i].box.raw
        else:
            missing += 1
            continue
        new = raw_to_family(raw, w, h, family, max_pixels)
        for m in _BOX_RE.finditer(text, cursor):
            vals = [float(g) for g in m.groups()]
            if all(abs(a - float(b)) < 0.51 for a, b in zip(vals, old, strict=True)):
                lit = "[" + ", ".join(str(v) for v in new) + "]"
                text = text[: m.start()] + lit + text[m.end() :]
                cursor = m.start() + len(lit)
                done += 1
                break
        else:
            missing += 1
    return text, done, missing


def trajectory_to_conversation(
    traj: Trajectory, family: str = "qwen2.5-vl", max_pixels: int = 401408, page_size: PageSize | None = None,
    grammar: Grammar | None = None,
) -> Conversation:
    """The trajectory as one conversation. With the recipe's `grammar` (what an export passes) every assistant turn
    is rendered from its parse (`vrag_data.export.targets`); without one the replies are taken as stored."""
    system_parts: list[str] = []
    raw_turns: list[tuple[str, str, list[ImageRef]]] = []  # (role, text, images)
    conv = Conversation(system="", turns=[], images=[])

    def add(role: str, text: str, images: list[ImageRef], author_placed: bool = False) -> None:
        raw_turns.append((role, with_placeholders(text, len(images), author_placed), list(images)))

    for m in traj.prompt:
        if m.role == "system":
            system_parts.append(escape_media_tokens(m.text))
        else:
            add(m.role, m.text, m.images, author_placed=True)
    for t in traj.turns:
        text, ok, bad = convert_turn_boxes(t, traj, family, max_pixels, page_size)
        conv.boxes_converted += ok
        conv.boxes_unconverted += bad
        add("assistant", text, [])
        if t.observation is not None and (t.observation.text or t.observation.images):
            add("user", t.observation.text, t.observation.images)

    merged: list[tuple[str, str, list[ImageRef]]] = []
    for role, text, imgs in raw_turns:
        if merged and merged[-1][0] == role:
            prev = merged[-1]
            merged[-1] = (role, prev[1] + "\n" + text, prev[2] + imgs)
        else:
            merged.append((role, text, imgs))
    while merged and merged[-1][0] == "user":
        merged.pop()
    if not merged:
        raise AlternationError(f"trajectory {traj.traj_id}: no assistant turn to train on")
    if merged[0][0] != "user":
        raise AlternationError(f"trajectory {traj.traj_id}: starts with an assistant turn (no user prompt)")
    conv.system = "\n".join(system_parts)
    for role, text, imgs in merged:
        if role == "assistant" and grammar is not None:  # the message as trained: rendered from its parse
            target = render_target(text, grammar)
            text = target.text
            conv.targets_rendered += 1
            conv.targets_changed += target.changed
        conv.turns.append(ChatTurn(role=role, content=text))  # type: ignore[arg-type]
        conv.images.extend(imgs)
    n_tokens = sum(t.content.count(IMAGE_TOKEN) for t in conv.turns)
    if n_tokens != len(conv.images):  # cannot happen after with_placeholders; kept as a guard on the invariant
        raise AlternationError(f"trajectory {traj.traj_id}: {n_tokens} <image> tokens for {len(conv.images)} images")
    return conv


ROLE_PROMPTS = ROLE_PROMPTS_KEY.name  # Trajectory.extra key: {turn role: [Message as a dict]} for agents with their own prompt


def role_prompts(traj: Trajectory) -> dict[str, list[Message]]:
    """The prompts of the agents that answered under a prompt of their own, by turn role."""
    raw = traj.extra.get(ROLE_PROMPTS) or {}
    return {role: [m if isinstance(m, Message) else Message.model_validate(m) for m in msgs]
            for role, msgs in raw.items() if msgs}


def trajectory_conversations(
    traj: Trajectory, family: str = "qwen2.5-vl", max_pixels: int = 401408, page_size: PageSize | None = None,
    grammar: Grammar | None = None,
) -> list[tuple[str, Conversation]]:
    """(agent, conversation) pairs: "" for the trajectory's own prompt and the turns of the roles without a
    prompt of their own, then one per role in `extra["role_prompts"]` (its prompt and its turns, in order)."""
    own = role_prompts(traj)
    if not own:
        return [("", trajectory_to_conversation(traj, family, max_pixels, page_size, grammar))]
    out = [("", trajectory_to_conversation(
        traj.model_copy(update={"turns": [t for t in traj.turns if t.role not in own]}), family, max_pixels, page_size,
        grammar))]
    for role, prompt in own.items():
        turns = [t for t in traj.turns if t.role == role]
        if turns:
            out.append((role, trajectory_to_conversation(traj.model_copy(update={"prompt": prompt, "turns": turns}),
                                                         family, max_pixels, page_size, grammar)))
    return out


def prompt_messages(prompt: list[Message]) -> tuple[list[dict[str, str]], list[ImageRef]]:
    """An RL prompt (system + first user message) as a chat list with `<image>` placeholders, and its images."""
    out: list[dict[str, str]] = []
    images: list[ImageRef] = []
    for m in prompt:
        text = escape_media_tokens(m.text) if m.role == "system" else with_placeholders(m.text, len(m.images), True)
        if m.role == "system":
            images_here: list[ImageRef] = []
        else:
            images_here = list(m.images)
        out.append({"role": m.role, "content": text})
        images.extend(images_here)
    return out, images
