"""The export gate: every SFT record and RL row is checked against what its recipe declares a training sample must be
(`SampleGate`, read from the run manifest like the other export hints), and a record that fails is never written:
it is counted with its reason (`skipped.jsonl`, the card, the summary and the report read `gate:<code>`).

Before a trajectory becomes SFT records, its rejected turns (an invalid action or a refused one, each with the error
prompt the environment answered) are dropped unless the recipe trains on retries (`without_rejected`): a rejected turn
changes nothing in the environment, so the accepted replies are the episode. Then every record is checked, each check
a pure function of the record and its trajectory:
- `invalid_turn`: an assistant turn of the record was rejected by the environment (off-format, text outside the
  grammar's tags, unusable at the reply door, an answer before any search, ...), or was followed by an error prompt,
  and the recipe does not train on retries;
- `not_rendered`: an assistant message is not its grammar's rendering of itself (targets are rendered from their
  parse, `vrag_data.export.targets`); `unparsed`: it does not parse under the recipe's grammar;
- `live_markup` / `unclean_text`: a system or user message would change under the allowlist (`vrag_data.inert`) with
  the recipe's prompt tags allowed (markup from outside, a character of a dropped category), or a reply the record
  trains on wrote markup into a field of its own (its answer, thought, query, an evidence line);
- `control_chars`: a text, or a reply the record trains on, holds a control character other than newline and tab;
- `box_outside`: a box the model wrote lies outside the page it refers to, or is inverted / degenerate;
- `no_evidence`: the episode did not gather what the recipe requires before answering (a search, a read, a page);
- `evidence_images`: the recipe writes evidence per image, and a target's evidence lines are not one per image shown;
- `too_many_turns`: more assistant turns than the recipe's samples hold (EVisRAG: one reply);
- `too_long`: an answer, evidence line, observation, thought or query longer than the recipe allows;
- RL rows: `control_chars`, `live_markup` / `unclean_text` (every string is its allowlist rendering: the prompt and the
  ground truth with the recipe's prompt tags allowed, `extra_info` with none), `no_ground_truth`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vrag_data.env.geometry import _BOX_RE, family_to_raw
from vrag_data.env.grammar import Grammar, grammar_for, grammar_from_description
from vrag_data.env.actions import parse_action
from vrag_data.env.parse import parse_fields
from vrag_data.export.targets import field_markup, render_target
from vrag_data.inert import first_change, live_markup, sanitize_text
from vrag_data.recipe.spec import SampleGate
from vrag_data.schema.records import RlRecord, SftRecord, Trajectory, Turn

if TYPE_CHECKING:
    from vrag_data.export.summary import Skips

# C0 controls but tab and newline, DEL, C1 controls, and lone surrogates (never valid in UTF-8 text)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_BOX_TAG = re.compile(r"<\s*(bbox|region)\s*>(.*?)<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)
_TOL = 1.0  # pixels a box may pass the page edge by (rounding of the model's coordinate frame)

Problem = tuple[str, str]  # (reason code, one-line reason)
PageSize = Callable[[str], tuple[int, int]]


def control_char(text: str) -> str:
    """'' when `text` holds no control character but newline and tab, else a description of the first one."""
    m = _CONTROL.search(text)
    if m is None:
        return ""
    return f"U+{ord(m.group()):04X} at character {m.start()}"


def strings(obj: object, where: str = "") -> Iterable[tuple[str, str]]:
    """(path, text) for every string inside a JSON-like value."""
    if isinstance(obj, str):
        yield where, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from strings(v, f"{where}[{i}]")


@dataclass
class RecipeGate:
    """One recipe's gate: its declared rules, the grammar its targets must parse under, its coordinate space."""

    rules: SampleGate
    grammar: Grammar | None
    source: str = "run manifest"

    @classmethod
    def from_hints(cls, h: Mapping[str, Any]) -> "RecipeGate":
        g = h.get("grammar")
        grammar = None
        if isinstance(g, Mapping):
            grammar = grammar_from_description(dict(g))
        elif isinstance(g, str):
            grammar = grammar_for(g)
        gate = h.get("gate")
        source = "run manifest" if isinstance(gate, Mapping) and "from" not in gate else (
            str(gate.get("from")) if isinstance(gate, Mapping) else "generic rules only (the recipe declares no gate)")
        return cls(SampleGate.from_description(gate if isinstance(gate, Mapping) else None), grammar, source)

    def describe(self) -> dict[str, Any]:
        return {**self.rules.describe(), "grammar": self.grammar.name if self.grammar else None, "source": self.source}


@dataclass
class ExportGate:
    """recipe name -> its gate (built once from the export hints); `sft` and `rl` list a record's problems."""

    hints: Callable[[str], Mapping[str, Any]]
    page_size: PageSize
    max_pixels: Callable[[str], int]
    by_recipe: dict[str, RecipeGate] = field(default_factory=dict)

    stopped_by: dict[str, Counter[str]] = field(default_factory=dict)

    def stopped(self, skips: "Skips", kind: str, recipe: str, rec_id: str, code: str, reason: str) -> None:
        """Count a record the gate stopped (per recipe) and list it with its reason (`skipped.jsonl`)."""
        self.stopped_by.setdefault(recipe, Counter())[f"{kind}:{code}"] += 1
        skips.add(kind, rec_id, f"gate:{code}", reason)

    def counts(self) -> dict[str, dict[str, int]]:
        return {r: dict(c) for r, c in sorted(self.stopped_by.items())}

    def of(self, recipe: str) -> RecipeGate:
        if recipe not in self.by_recipe:
            self.by_recipe[recipe] = RecipeGate.from_hints(self.hints(recipe))
        return self.by_recipe[recipe]

    def trains_retries(self, recipe: str) -> bool:
        return self.of(recipe).rules.trains_retries

    def sft(self, traj: Trajectory, rec: SftRecord) -> list[Problem]:
        gate = self.of(traj.recipe)
        agent = str(rec.metadata.get("agent") or "")
        turns = agent_turns(traj, agent)
        return [*record_text_problems(rec, gate), *markup_problems(turns, rec, gate), *turn_problems(turns, gate.rules),
                *target_problems(rec, gate), *box_problems(traj, turns, self.page_size, self.max_pixels(traj.recipe)),
                *evidence_problems(traj, gate.rules), *image_evidence_problems(rec, gate)]

    def rl(self, rec: RlRecord, recipe: str) -> list[Problem]:
        problems: list[Problem] = []
        for where, text in strings(rec.model_dump(mode="json")):
            bad = control_char(text)
            if bad:
                problems.append(("control_chars", f"RL row {rec.id}: {where} holds a control character ({bad})"))
                break
        problems.extend(rl_markup_problems(rec, self.of(recipe)))
        if not rec.reward_model.ground_truth.strip():
            problems.append(("no_ground_truth", f"RL row {rec.id}: empty ground truth"))
        return problems


def without_rejected(traj: Trajectory) -> tuple[Trajectory, int]:
    """The trajectory without its rejected turns (an invalid action, or an action the environment refused with its
    error prompt) and the number dropped. A rejected turn changes nothing in the environment, so the turns left are
    the episode as it went; what trains is the accepted replies (a recipe that trains on retries keeps them)."""
    kept = [t for t in traj.turns if not rejected(t)]
    n = len(traj.turns) - len(kept)
    return (traj.model_copy(update={"turns": kept}) if n else traj), n


def rejected(t: Turn) -> bool:
    return t.action.kind == "invalid" or (t.observation is not None and t.observation.kind == "error")


def agent_turns(traj: Trajectory, agent: str) -> list[Turn]:
    """The turns whose replies a record of `agent` trains on ("" = the roles without a prompt of their own)."""
    own = set((traj.extra.get("role_prompts") or {}).keys())
    if agent:
        return [t for t in traj.turns if t.role == agent]
    return [t for t in traj.turns if t.role not in own]


def prompt_tags(gate: "RecipeGate") -> frozenset[str]:
    """The tags a record's system and user messages may hold: the grammar's (the recipe's prompts name them), the
    image placeholder the exporters write, and the tags the recipe declares for its own prompts."""
    return frozenset({*(gate.grammar.tags if gate.grammar else ()), "image", *gate.rules.prompt_tags})


def record_text_problems(rec: SftRecord, gate: "RecipeGate") -> list[Problem]:
    """Every message is what the allowlist renders: a system or user message does not change under it (the recipe's
    prompt tags allowed), an assistant message is its own grammar rendering (`vrag_data.export.targets`); no
    negative or inverted box in a target (after conversion)."""
    allowed = prompt_tags(gate)
    for i, m in enumerate(rec.messages):
        bad = control_char(m.content)
        if bad:
            return [("control_chars", f"record {rec.id}: {m.role} message {i} holds a control character ({bad})")]
        if m.role == "assistant":
            if gate.grammar is not None and render_target(m.content, gate.grammar).text != m.content:
                return [("not_rendered", f"record {rec.id}: assistant message {i} is not its {gate.grammar.name} "
                                         "rendering (a target must be rendered from its parse)")]
            bad = written_box_problem(m.content)
            if bad:
                return [("box_outside", f"record {rec.id}: assistant message {i}: {bad}")]
            continue
        live = live_markup(m.content, allowed)
        if live:
            return [("live_markup", f"record {rec.id}: {m.role} message {i} holds the markup {sanitize_text(live)!r}")]
        change = first_change(m.content, allowed)
        if change:
            return [("unclean_text", f"record {rec.id}: {m.role} message {i} changes under the allowlist: {change}")]
    return []


def markup_problems(turns: list[Turn], rec: SftRecord, gate: RecipeGate) -> list[Problem]:
    """No control character (but a CR) in a reply the record trains on, and no markup inside one of its fields (an
    answer, a thought, a query, an evidence line): the rendering would drop or neutralise them, but a reply that wrote
    a tag or an escape sequence into its answer is no clean sample. (Format characters, zero-width spaces and bidi
    controls, are dropped by the rendering: the sample is kept without them.)"""
    for t in turns:
        if rejected(t):
            continue
        bad = control_char(t.assistant.replace("\r", ""))  # a CR is a line end (normalised); ESC, NUL, BEL are not text
        if bad:
            return [("control_chars", f"record {rec.id}: turn {t.idx} ({t.role}) holds a control character ({bad})")]
        bad = field_markup(t.assistant, gate.grammar) if gate.grammar is not None else ""
        if bad:
            return [("live_markup", f"record {rec.id}: turn {t.idx} ({t.role}): {bad}")]
    return []


def rl_markup_problems(rec: RlRecord, gate: "RecipeGate") -> list[Problem]:
    """Every string of an RL row is what the allowlist renders: its prompt and ground truth with the recipe's prompt
    tags allowed (EVisRAG's ground truth is its four-tag target), its data (`extra_info`) with no tag at all."""
    allowed = prompt_tags(gate)
    row = rec.model_dump(mode="json")
    extra = row.pop("extra_info", {})
    for where, text, allow in [*((w, t, allowed) for w, t in strings(row)),
                               *((w, t, frozenset()) for w, t in strings({"extra_info": extra}))]:
        live = live_markup(text, allow)
        if live:
            return [("live_markup", f"RL row {rec.id}: {where} holds the markup {sanitize_text(live)!r}")]
        change = first_change(text, allow)
        if change:
            return [("unclean_text", f"RL row {rec.id}: {where} changes under the allowlist: {change}")]
    return []


def turn_problems(turns: list[Turn], rules: SampleGate) -> list[Problem]:
    """A rejected attempt (and the error prompt after it) inside the record, unless the recipe trains on retries."""
    if rules.trains_retries:
        return []
    for t in turns:
        if t.action.kind == "invalid":
            return [("invalid_turn", f"turn {t.idx} ({t.role}) was rejected: {t.action.reason[:160]}")]
        if rejected(t):
            return [("invalid_turn", f"turn {t.idx} ({t.role}) got the error prompt: {t.observation.text[:160]}")]  # type: ignore[union-attr]
    return []


def target_problems(rec: SftRecord, gate: RecipeGate) -> list[Problem]:
    """Every assistant message of the record parses under the recipe's grammar, within the recipe's lengths."""
    targets = [m.content for m in rec.messages if m.role == "assistant"]
    rules = gate.rules
    if rules.max_assistant_turns is not None and len(targets) > rules.max_assistant_turns:
        return [("too_many_turns", f"record {rec.id}: {len(targets)} assistant turns; the recipe's samples hold at most "
                                   f"{rules.max_assistant_turns}")]
    if gate.grammar is None:
        return [("unparsed", f"record {rec.id}: the run names no grammar to check its replies against; re-run synth")]
    for i, text in enumerate(targets):
        kind, fields = parse_fields(text, gate.grammar)
        if kind == "invalid":
            return [("unparsed", f"record {rec.id}: assistant turn {i} breaks the {gate.grammar.name} format: "
                                 f"{fields.get('reason', '')[:160]}")]
        too_long = _too_long(fields, rules.max_chars)
        if too_long:
            return [("too_long", f"record {rec.id}: assistant turn {i}: {too_long}")]
    return []


def _too_long(fields: Mapping[str, Any], limits: Mapping[str, int]) -> str:
    values = [("answer", fields.get("answer") or ""), ("observe", fields.get("observe") or ""),
              ("thought", fields.get("thought") or ""), ("query", fields.get("query") or ""),
              *(("evidence_line", x) for x in fields.get("evidence") or ())]
    for name, value in values:
        limit = limits.get(name)
        if limit is not None and len(value) > limit:
            return f"{name} of {len(value):,} characters (limit {limit:,})"
    return ""


def written_box_problem(text: str) -> str:
    """'' when every box inside a <bbox>/<region> tag of `text` has no negative corner and a positive extent."""
    for tag in _BOX_TAG.finditer(text):
        for m in _BOX_RE.finditer(tag.group(2)):
            x1, y1, x2, y2 = (float(g) for g in m.groups())
            if min(x1, y1, x2, y2) < 0 or x2 <= x1 or y2 <= y1:
                return f"box {m.group(0)} is negative, inverted or empty"
    return ""


def box_problems(traj: Trajectory, turns: list[Turn], page_size: PageSize, max_pixels: int) -> list[Problem]:
    """Every box the model wrote (in the run's coordinate space) lies inside the page it refers to, and is a box."""
    space = str(traj.extra.get("coord_space") or "")
    src_max = int(traj.extra.get("coord_max_pixels") or max_pixels)
    crops: dict[int, list[str]] = {}
    for c in traj.crops:
        crops.setdefault(c.turn, []).append(c.page_id)
    for t in turns:
        bad = written_box_problem(t.assistant)
        if bad:
            return [("box_outside", f"turn {t.idx}: {bad}")]
        if t.action.kind != "crop":
            continue
        pages = t.action.page_ids or crops.get(t.idx, [])
        for i, box in enumerate(t.action.boxes):
            page = pages[i] if i < len(pages) else (pages[0] if pages else "")
            if len(box) != 4 or not page:
                return [("box_outside", f"turn {t.idx}: box {box} refers to no page")]
            try:
                w, h = page_size(page)
            except KeyError:
                return [("box_outside", f"turn {t.idx}: size of page {page} unknown; the box cannot be checked")]
            x1, y1, x2, y2 = family_to_raw(box, w, h, space or "raw", src_max)
            if x1 < -_TOL or y1 < -_TOL or x2 > w + _TOL or y2 > h + _TOL or x2 <= x1 or y2 <= y1:
                return [("box_outside", f"turn {t.idx}: box {box} ({space or 'raw'}) is outside page {page} "
                                        f"({w}x{h} px: [{x1:.0f}, {y1:.0f}, {x2:.0f}, {y2:.0f}])")]
    return []


def shown_pages(traj: Trajectory) -> bool:
    """The episode was shown a page: one it retrieved, or a page image in its prompt or an observation."""
    return bool(traj.retrieved_pages or any(m.images for m in traj.prompt)
                or any(t.observation is not None and t.observation.images for t in traj.turns))


def evidence_problems(traj: Trajectory, rules: SampleGate) -> list[Problem]:
    """The episode gathered what the recipe requires before its answer (no closed-book samples)."""
    if rules.saw_pages and not shown_pages(traj):
        return [("no_evidence", "the episode was shown no retrieved page before answering")]
    done = {t.action.kind for t in traj.turns
            if t.action.kind != "invalid" and t.observation is not None and t.observation.kind != "error"}
    missing = [k for k in rules.requires if k not in done]
    if missing:
        return [("no_evidence", f"no successful {' or '.join(missing)} before the answer (the recipe requires "
                                f"{', '.join(rules.requires)})")]
    return []


def image_evidence_problems(rec: SftRecord, gate: RecipeGate) -> list[Problem]:
    """A recipe whose evidence is written per image (`SampleGate.evidence_per_image`): every target holds one evidence
    line per image the record shows, in order ([1] ... [n]); a line for an image never shown is phantom evidence."""
    if not gate.rules.evidence_per_image or gate.grammar is None:
        return []
    n_images = len(rec.images)
    for i, m in enumerate(x for x in rec.messages if x.role == "assistant"):
        lines = parse_action(m.content, gate.grammar).evidence
        if len(lines) != n_images:
            return [("evidence_images", f"record {rec.id}: assistant turn {i} writes {len(lines)} evidence line(s) for "
                                        f"{n_images} image(s) shown; the recipe scores evidence per image")]
    return []
