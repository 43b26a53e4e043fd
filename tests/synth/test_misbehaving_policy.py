"""Every episode ends within its recipe's budget whatever the models write: a misbehaving-policy matrix.

Each recipe runs real synthesis (`vrag_data.synth.run.synth`) on the sample workspace with every role it uses
pointed at a scripted local OpenAI-compatible server in behaviour mode. Sample i of every task plays behaviour i
(answers before searching, never answers, repeats a search, crops outside the page, invalid markup, empty and
blank replies, 8k-token rambles, boxes in the wrong coordinate space, tool-call syntax, no <think>). With a turn
budget of 3, every episode must be recorded with a finish status, take at most 3 + 1 policy turns, and make at
most 3 + 1 model calls per role or step (counted by the server and by the episode); the run's request cache must
stay small. Before the budget rule an answer before any search re-opened the forced-answer turn forever.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.support.openai_server import BehaviourMode, Call, OpenAIServer
from tests.support.synth_workspace import sample_workspace
from vrag_data.config import RunConfig
from vrag_data.env.parse import parse_fields
from vrag_data.recipe import resolve_recipe
from vrag_data.store.run import RunDir
from vrag_data.store.workspace import Workspace
from vrag_data.synth.ledger import read_trajectories
from vrag_data.synth.run import synth
from vrag_data.tasks.store import load_tasks
from vrag_data.rewards.judge_prompts import unfenced

BUDGET = 3  # synth.recipe_options.<recipe>.max_turns
TASKS = 2
SEED = 1000  # sampling seed of every role: the server reads the sample index (= behaviour) from seed - SEED
ANSWER = "42"
BEHAVIOURS = ["answer_first", "never_answers", "repeat_search", "crop_outside", "invalid_markup", "empty", "blank",
              "ramble", "wrong_coords", "tool_call", "no_think",
              # what reached the training files before the export gate: replies cut at max_tokens, control characters,
              # bytes that are no UTF-8, a lone surrogate, a 1 MB reply, answers without evidence, boxes with a negative
              # corner or inverted, a 5,000-character field, a retry after a rejected reply, an empty tag
              "truncated", "control_chars", "undecodable", "lone_surrogate", "huge_reply", "closed_book", "negative_box",
              "inverted_box", "long_field", "retry_then_ok", "empty_tag",
              "well_behaved"]  # the clean path itself: what the gate must let through
# behaviours whose every accepted reply is unfit to train on (the rejected ones are dropped from the records): nothing of
# theirs is exported (MM-Doc-R1's answer agent answers under its own prompt: its record is checked like every other)
NEVER_CLEAN = {"answer_first", "empty", "blank", "ramble", "tool_call", "truncated", "control_chars", "undecodable",
               "lone_surrogate", "closed_book", "negative_box", "long_field"}
HUGE = "<think>" + "x" * (1 << 20) + "</think>"  # a 1 MB reply
FOUR_TAGS = f"<observe>image 1 holds the table</observe><evidence>[1]: net income is {ANSWER}</evidence><think>so {ANSWER}</think><answer>{ANSWER}</answer>"
RAMBLE = ("Let me think about this question once more, carefully and from the very beginning, weighing every "
          "possibility before I commit to anything at all. ") * 250  # ~32k characters, ~8k tokens, no digits, no tags


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return sample_workspace(tmp_path_factory.getbasetemp())


def phase_of(req: dict) -> str:
    """The role a request is for (each role has its own model name), and the policy's side steps by their prompt."""
    model = str(req.get("model", ""))
    if model != "policy-m":
        return model.removesuffix("-m")
    text = str(req.get("messages"))
    if "Answer the question using only" in text:  # MM-Doc-R1's answer agent
        return "answer"
    if "candidate regions outlined" in text:  # UniDoc-RL's candidate-region step (and its re-asks)
        return "candidates"
    return "policy"


def recipe_of(call: Call) -> str:
    system, first = call.system, call.text(call.messages[0]) if call.messages else ""
    if "search engine over a collection" in system:
        return "vrag_rl"
    if "<select>[i, j]</select>" in system:
        return "unidoc_rl"
    if "exploring a collection" in system:
        return "visor"
    if "gather information from one document" in system:
        return "mmdoc_r1"
    if "four steps" in first:
        return "evisrag"
    return "?"


def side_role(call: Call) -> str:
    """Helper roles answer sensibly unless the behaviour breaks every reply (empty, ramble, invalid markup)."""
    b, p = call.behaviour, call.phase
    if b == "empty":
        return ""
    if b == "ramble":
        return RAMBLE
    if b == "invalid_markup":
        return {"grounding": "<bbox>[12, 40", "candidates": "<select>[1</select", "answer": "<answer>42"}.get(p, "<think>unclosed")
    if p == "grounding":
        return "<bbox>[40, 60, 300, 200]</bbox>"
    if p == "planner":
        return "Here is my proposed initial plan.\n(1) Search for the figure.\n(2) Read the pages found."
    if p == "reader":
        return f"Visual elements: a table. Relevant: the figure is {ANSWER}."
    if p == "candidates":
        return "<think>Region 1 holds the figure.</think>\n<select>[1]</select>"
    if p == "answer":
        return "<think>No usable data.</think>" if b == "never_answers" else f"<think>From the notes.</think><answer>{ANSWER}</answer>"
    return "<judge>True</judge>"


def payload(text: str, finish_reason: str = "stop") -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "policy-m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def raw_body(content_json: bytes) -> bytes:
    """A response body whose content string is `content_json` as sent (not re-encoded: bad bytes stay bad)."""
    return (b'{"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "policy-m", "choices": [{"index": 0, '
            b'"message": {"role": "assistant", "content": "' + content_json + b'"}, "finish_reason": "stop"}], '
            b'"usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}')


def clean_path(call: Call, recipe: str, n: int) -> str:
    """The well-behaved episode: search, (crop / read,) answer; MM-Doc-R1: search, read, <FINISH>."""
    think = f"<think>The question is: {call.episode} Step {n}.</think>\n"
    if recipe == "evisrag":
        return FOUR_TAGS
    if recipe == "mmdoc_r1":
        return think + ['<search>["net income"]</search>', '<read>[{"page_ids": [1], "query": "net income"}]</read>', "<FINISH>"][min(n, 2)]
    if n == 0:
        return think + "<search>Zephyra net income</search>"
    if recipe == "unidoc_rl" and n == 1:
        return think + "<select>[1]</select>"
    return think + f"<answer>{ANSWER}</answer>"


def gate_behaviour(call: Call, recipe: str) -> "str | dict | bytes":
    """The behaviours the export gate must stop (see NEVER_CLEAN): each breaks one turn of an otherwise clean path."""
    b, n = call.behaviour, call.n
    think = f"<think>The question is: {call.episode} Step {n}.</think>\n"
    box_turn = 2 if recipe == "unidoc_rl" else 1  # UniDoc-RL selects a page before it may crop
    if b == "well_behaved":
        return clean_path(call, recipe, n)
    if b == "truncated":  # every reply cut at max_tokens, whole-looking or not
        return payload(clean_path(call, recipe, n) if n % 2 == 0 else clean_path(call, recipe, n)[:25], "length")
    if b == "control_chars":
        text = clean_path(call, recipe, n)
        return text.replace("The question", "\u0007The question").replace(ANSWER, "\u001b[0m4\u00002").replace("net income", "net\u001fincome\u0008")
    if b == "undecodable":
        return raw_body(b"<think>net income \xff\xfe</think><answer>4\xc3\x282</answer>")
    if b == "lone_surrogate":
        return raw_body(b"<think>a\\ud800b</think><search>net income</search>" if n == 0 else b"<answer>4\\udfff2</answer>")
    if b == "huge_reply":
        return HUGE + clean_path(call, recipe, n) if n == 1 or recipe == "evisrag" else clean_path(call, recipe, n - (n > 1))
    if b == "closed_book":
        if recipe == "mmdoc_r1":
            return think + "<FINISH>"
        if recipe == "evisrag":  # the pages shown are the environment's: the reply is checked as written
            return FOUR_TAGS.replace("<observe>image 1 holds the table</observe>", "<observe>I know this without the images</observe>")
        return think + ("<search>qqqxv wwzzk</search>" if n == 0 else f"<answer>{ANSWER}</answer>")  # a search that finds nothing
    if b in ("negative_box", "inverted_box"):
        box = "[-50, -20, 100, 100]" if b == "negative_box" else "[300, 200, 10, 20]"
        if recipe in ("evisrag", "mmdoc_r1"):  # no <bbox> in their grammars: the box is an off-format reply
            return (FOUR_TAGS if recipe == "evisrag" else think) + f"<bbox>{box}</bbox>"
        return think + f"<bbox>{box}</bbox>" if n == box_turn else clean_path(call, recipe, n - (n > box_turn))
    if b == "long_field":
        if recipe == "evisrag":
            return FOUR_TAGS.replace(f"net income is {ANSWER}", "y" * 5000)
        if recipe == "mmdoc_r1":
            return f"<think>{'z' * 9000}</think>" + clean_path(call, recipe, n).split("</think>", 1)[1]
        text = clean_path(call, recipe, n)
        return text.replace(f"<answer>{ANSWER}</answer>", f"<answer>{ANSWER} {'w' * 5000}</answer>")
    if b == "retry_then_ok":
        return "<observe>x<evidence>[1]: x" if n == 0 else clean_path(call, recipe, n - 1)
    if b == "empty_tag":
        if recipe == "evisrag":
            return FOUR_TAGS.replace("<observe>image 1 holds the table</observe>", "<observe></observe>")
        return "<think></think><search>Zephyra net income</search>" if n == 0 else clean_path(call, recipe, n - 1)
    raise AssertionError(f"unknown behaviour {b}")


def policy(call: Call, recipe: str) -> "str | dict | bytes":
    """The misbehaving policy. Its thoughts restate the question, so that side requests that carry only the
    thought (the grounding expert's) are attributed to their episode."""
    b, n, q = call.behaviour, call.n, call.episode
    think = f"<think>The question is: {q} Step {n}.</think>\n"
    mm = recipe == "mmdoc_r1"
    search = (f'<search>["net income", "step {n}"]</search>' if mm else f"<search>Zephyra net income step {n}</search>")
    box = "[100, 100, 500, 400]" if recipe == "unidoc_rl" else "[10, 20, 300, 200]"
    if recipe == "evisrag" and b in BEHAVIOURS[:11]:  # one reply over the shown pages; each breaks its four-tag form
        return {"answer_first": f"<answer>{ANSWER}</answer>", "never_answers": "<observe>x</observe><evidence>[1]: x</evidence><think>y</think>",
                "repeat_search": "<search>net income</search>", "crop_outside": "<bbox>[5000, 5000, 6000, 6000]</bbox>",
                "invalid_markup": "<observe>x<evidence>[1]: x</evidence><answer>42", "empty": "", "blank": "  \n ", "ramble": RAMBLE,
                "wrong_coords": f"<observe>x</observe><evidence>[9]: x</evidence><think>y</think><answer>{ANSWER}</answer><bbox>[0.1, 0.2, 0.5, 0.6]</bbox>",
                "tool_call": '<tool_call>{"name": "answer", "arguments": {"text": "42"}}</tool_call>',
                "no_think": f"<observe>x</observe><evidence>[1]: x</evidence><answer>{ANSWER}</answer>"}[b]
    if b == "answer_first":
        return think + f"<answer>{ANSWER}</answer>"
    if b == "never_answers":
        if mm:
            # 3 reader calls per read: the second read would go past the episode's reader budget (3 + 1)
            reads = ", ".join(f'{{"page_ids": [{i}], "query": "net income"}}' for i in (1, 2, 3))
            return think + (search if n == 0 else f"<read>[{reads}]</read>")
        if recipe == "unidoc_rl":
            return think + (search if n % 2 == 0 else "<select>[1]</select>")
        return think + (search if n % 2 == 0 else f"<bbox>{box}</bbox>")
    if b == "repeat_search":
        return think + ('<search>["net income"]</search>' if mm else "<search>Zephyra net income</search>")
    if b == "crop_outside":
        if n == 0:
            return think + search
        if mm:
            return think + '<read>[{"page_ids": [999], "query": "net income"}]</read>'
        if recipe == "unidoc_rl" and n == 1:
            return think + "<select>[1]</select>"
        return think + "<bbox>[5000, 5000, 6000, 6000]</bbox>"
    if b == "invalid_markup":  # broken markup, with the steps that bring in the side roles' broken replies
        if recipe == "unidoc_rl":  # a selection every turn: each candidate step gets unusable replies
            return think + (search if n == 0 else "<select>[1]</select>")
        if recipe == "vrag_rl" and n == 2:  # a crop after the search of turn 1: the grounding reply has no box
            return think + f"<bbox>{box}</bbox>"
        return ["<search>Zephyra net income", '<think>a</think><search>["net", </search>', "<answer><answer>1</answer>",
                "<think>a</think><search>x</search><answer>y</answer>"][n % 4]
    if b == "empty":
        return ""
    if b == "blank":
        return "  \n "
    if b == "ramble":
        return RAMBLE
    if b == "wrong_coords":
        if n == 0:
            return think + search
        if mm:
            return think + '<read>[{"page_ids": ["sample00_zephyra_analytics_report_2.jpg"], "query": "net income"}]</read>'
        if recipe == "unidoc_rl":  # pixels of the raw page where 0-1000 is expected
            return think + ("<select>[1]</select>" if n == 1 else "<bbox>[1100, 1400, 1220, 1580]</bbox>")
        return think + "<bbox>[0.1, 0.2, 0.5, 0.6]</bbox>"  # 0-1 fractions where pixels are expected
    if b == "tool_call":
        return '<tool_call>\n{"name": "search", "arguments": {"query": "net income"}}\n</tool_call>'
    if b == "no_think":
        return (search if n == 0 else "<FINISH>" if mm else f"<answer>{ANSWER}</answer>")
    return gate_behaviour(call, recipe)


def script(call: Call) -> "str | dict | bytes":
    if call.phase != "policy":
        return side_role(call)
    return policy(call, recipe_of(call))


def run_config(base_url: str, roles: tuple[str, ...], recipe: str) -> RunConfig:
    def role(name: str) -> dict:
        return {"endpoints": [{"base_url": base_url, "model": f"{name}-m"}], "max_retries": 0, "timeout_s": 30,
                "sampling": {"temperature": 0.0, "max_tokens": 8192, "seed": SEED}}

    return RunConfig.model_validate({
        "roles": {r: role(r) for r in roles},
        # UniDoc-RL: as many re-asks per candidate step as the options allow, so the episode's call bound is what stops them
        "synth": {"recipe_options": {recipe: {"max_turns": BUDGET, **({"candidate_retries": 5} if recipe == "unidoc_rl" else {})}}},
    })


RECIPES = ("vrag_rl", "unidoc_rl", "visor", "evisrag", "mmdoc_r1")


@pytest.mark.soak
@pytest.mark.parametrize("name", RECIPES)
def test_every_episode_ends_within_budget_whatever_the_policy_writes(ws, name, tmp_path):
    questions = [t.question for t in load_tasks(Workspace(str(ws)), TASKS)]
    mode = BehaviourMode(BEHAVIOURS, script, phase_of, questions, seed_base=SEED, limit=4 * (BUDGET + 1))
    with OpenAIServer(reply=mode, models=["policy-m", "grounding-m", "planner-m", "reader-m", "judge-m", "student-m"]) as srv:
        probe = resolve_recipe(name)
        cfg = run_config(srv.base_url, probe.role_names, name)
        recipe = resolve_recipe(name, cfg)
        res = synth(ws, cfg, recipe, run_id=f"misbehave-{name}", samples=len(BEHAVIOURS), limit=TASKS, progress=False)
        n_requests = len(srv.requests)
        srv_requests = list(srv.requests)
    assert mode.unattributed == 0  # every request was counted against its episode
    assert res.stats["finished"] == TASKS * len(BEHAVIOURS)
    trajs = read_trajectories(Path(res.run_dir))
    assert len(trajs) == TASKS * len(BEHAVIOURS)  # every episode recorded, none lost to an exception
    by_behaviour: dict[str, Counter] = {b: Counter() for b in BEHAVIOURS}
    problems = []  # every episode that breaks a bound, so a failure shows the whole matrix row
    for t in trajs:
        b = BEHAVIOURS[t.sample]
        where = f"{b}/{t.task_id}: status {t.status} ({t.reason[:80]}), turns {[x.action.kind for x in t.turns]}"
        by_behaviour[b][t.status] += 1
        calls = t.extra.get("calls", {})
        if t.status not in ("answered", "budget", "no_answer", "error") or (t.status != "answered" and not t.reason):
            problems.append(f"{where}: no recorded finish status and reason")
        if sum(1 for x in t.turns if x.role == "policy") > BUDGET + 1:
            problems.append(f"{where}: more than {BUDGET + 1} policy turns")
        if not calls or any(v > BUDGET + 1 for v in calls.values()) or t.usage.requests > sum(calls.values()):
            problems.append(f"{where}: model calls per phase {calls} (usage: {t.usage.requests} requests)")
    for (question, b, phase), count in mode.counts.items():
        if count > BUDGET + 1:
            problems.append(f"{b}/{question[:40]!r}: the server saw {count} {phase} requests")
    assert not problems, f"{name}:\n" + "\n".join(problems)
    assert n_requests == sum(mode.counts.values())

    played = {b: [t for t in trajs if BEHAVIOURS[t.sample] == b] for b in BEHAVIOURS}
    # an answer before any search is rejected every time: 3 free turns, the forced one, then status budget
    if name in ("vrag_rl", "unidoc_rl", "visor"):
        first = played["answer_first"]
        assert all(t.status == "budget" and [x.action.kind for x in t.turns] == ["answer"] * 4 for t in first)
        assert all(t.n_invalid == 4 and "answer before any search" in t.reason for t in first)
    if name == "unidoc_rl":  # a candidate step re-asked up to its 5 retries is cut at the episode's 3 + 1 calls
        for t in played["invalid_markup"]:
            assert t.extra["calls"]["candidates"] == BUDGET + 1
            assert t.extra["candidates"][0]["how"] == "the candidate step's call budget is spent"
    if name == "mmdoc_r1":  # 3 reads per <read>: the first read gets 3 reader calls, the next one is refused
        for t in played["never_answers"]:
            assert t.extra["calls"]["reader"] == 3 and t.extra["calls"]["answer"] == 2  # two answer-agent attempts
            assert any("only 1 more may be made" in r for r in t.extra["invalid_reasons"])
        # the seeker's rejected answers end in budget, and the answer agent still answers (the paper's pipeline)
        assert all(t.status == "answered" and t.final_answer == ANSWER for t in played["answer_first"])
    # an empty reply is the model's reply, not a transport fault: never retried, recorded as an invalid turn, and the
    # budget (or the recipe's answer agent) ends the episode
    assert all(t.status != "error" and t.n_invalid >= 1 for t in played["empty"])
    assert sum(by_behaviour["empty"].values()) == TASKS
    # the request cache holds one row per call: ~34 KB at most each (the ramble) but the 1 MB replies, which are
    # cached once (a resume pays for none of them again) and never sent back (a placeholder stands in for them)
    db = Path(res.run_dir) / "requests.sqlite"
    with sqlite3.connect(db) as con:
        rows, chars = con.execute("SELECT count(*), coalesce(sum(length(text)), 0) FROM responses").fetchone()
    n_huge = sum(c for (_, b, p), c in mode.counts.items() if b == "huge_reply" and p == "policy") if name == "evisrag" else TASKS
    assert rows == n_requests  # every reply cached, the empty ones too: a resume pays for none of them again
    assert chars <= rows * len(RAMBLE) + n_huge * len(HUGE)
    # the rambles dominate: 2 tasks x at most 7 calls (MM-Doc-R1: planner 1 + seeker 4 + answer agent 2) x 32.5 KB
    # = 455 KB; everything else is a few hundred bytes per row (measured: 0.4-0.65 MB per recipe), plus the 1 MB replies
    size = sum(f.stat().st_size for f in db.parent.glob("requests.sqlite*"))
    assert size < (1 << 20) + n_huge * len(HUGE) * 1.1, size
    # no request after a 1 MB reply carries it: the largest request body is far below it
    largest = max(len(json.dumps(r.body)) for r in srv_requests if r.body is not None)
    assert largest < len(HUGE) // 4, largest

    exported = filter_and_export(ws, cfg, recipe, res.run_id, tmp_path / "export")
    # augmented trajectories (EVisRAG's top-k variants) are the filter's: checked like every other one
    check_exports(name, recipe, exported, {t.traj_id: t for t in RunDir(res.run_dir).trajectories()})


def filter_and_export(ws: Path, cfg: RunConfig, recipe, run_id: str, out: Path) -> dict:
    """The run's filter (its judge says True to everything and its student writes judge tags: both misbehave) and an
    export in every format; returns what the files hold: SFT records (LLaMA-Factory and HF) and RL rows' texts."""
    import pyarrow.parquet as pq

    from vrag_data.export import export_run
    from vrag_data.export.runner import NothingToExport
    from vrag_data.curate.postprocess import judge_and_filter

    def after_synth(req: dict) -> str:  # the judge, the student and the teacher of an augmentation
        call = Call(req, "", "?", phase_of(req), 0)
        if call.phase == "student":  # the clean path to a wrong answer: the difficulty filters keep its tasks
            turns = sum(1 for m in call.messages if m.get("role") == "assistant")
            return clean_path(call, recipe_of(call), turns).replace(f"<answer>{ANSWER}", "<answer>7")
        if call.phase == "judge" and unfenced(call.last)[-1:] == ["7"]:
            return "<judge>False</judge>"  # the student is wrong; everything else passes (a judge that approves all)
        return FOUR_TAGS if call.phase == "policy" else side_role(call)

    with OpenAIServer(reply=after_synth, models=["policy-m", "grounding-m", "planner-m", "reader-m", "judge-m", "student-m"]) as srv:
        cfg = run_config(srv.base_url, recipe.role_names, recipe.name)
        judge_and_filter(str(ws), run_id, cfg, recipe)
    try:
        export_run(Workspace(str(ws)), run_id, formats=["llamafactory", "hf", "verl", "easyr1"], out_dir=out, recipes=[recipe])
    except NothingToExport:
        return {"sft": [], "rl": [], "skipped": ""}
    records = []
    for f in (out / "llamafactory").glob("*/*.json"):  # <recipe>/<shard>.json
        records += [{"id": r["id"], "messages": [{"role": "system", "content": r.get("system") or ""}, *r["messages"]]}
                    for r in json.loads(f.read_text())]
    for f in (out / "hf").rglob("sft*.parquet"):
        records += [{"id": r["id"], "messages": r["messages"]} for r in pq.read_table(f).to_pylist()]
    rl_texts = [json.dumps(r, ensure_ascii=False) for f in out.rglob("*.parquet") if "sft" not in f.name
                for r in pq.read_table(f).to_pylist()]
    rl_texts += [line for f in out.rglob("*.jsonl") if f.name != "skipped.jsonl" for line in f.read_text().splitlines()]
    return {"sft": records, "rl": rl_texts, "skipped": (out / "skipped.jsonl").read_text()}


def never_clean(recipe: str) -> set[str]:
    """NEVER_CLEAN as it applies to `recipe`: VRAG-RL's grounding expert re-locates every crop, so the teacher's box is
    never a target; a search that finds pages is no closed book (only MM-Doc-R1's <FINISH> first is one for sure)."""
    out = set(NEVER_CLEAN) - ({"negative_box"} if recipe == "vrag_rl" else set())
    return out - ({"closed_book"} if recipe != "mmdoc_r1" else set())


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
BOX = re.compile(r"<bbox>\s*\[([^\]]*)\]\s*</bbox>")


def check_exports(name: str, recipe, exported: dict, trajs: dict) -> None:
    """Every cell (recipe x behaviour): no exported training target comes from an invalid, truncated, closed-book or
    out-of-page turn, and no exported text holds a control character."""
    invalid_prompt = recipe.env.prompts.invalid.split("{")[0][:40]
    problems = []
    per_cell: Counter = Counter()
    for rec in exported["sft"]:
        traj = trajs[rec["id"].split(":")[0]]
        agent = rec["id"].split(":")[1] if ":" in rec["id"] else ""
        b = BEHAVIOURS[traj.sample]
        per_cell[b] += 1
        where = f"{name}/{b} record {rec['id']}"
        turns = [t for t in traj.turns if (t.role == agent if agent else t.role not in (traj.extra.get("role_prompts") or {}))]
        # (an augmented copy is a new teacher reply over other pages, checked below like every record)
        if b in never_clean(name) and not agent and not traj.extra.get("augmentation"):
            problems.append(f"{where}: exported, but every reply of this behaviour breaks a training target")
        rejected = [t.assistant for t in turns if t.action.kind == "invalid" or (t.observation is not None and t.observation.kind == "error")]
        targets = [m["content"] for m in rec["messages"] if m["role"] == "assistant"]
        if any(r.strip() and r.strip() in x for r in rejected for x in targets):
            problems.append(f"{where}: trains on a rejected or truncated turn")
        kinds = {t.action.kind for t in traj.turns if t.observation is not None and t.observation.kind != "error"}
        if name == "mmdoc_r1" and not {"search", "read"} <= kinds:
            problems.append(f"{where}: closed book (no search and read before <FINISH>)")
        if name in ("vrag_rl", "unidoc_rl", "visor") and ("search" not in kinds or not traj.retrieved_pages):
            problems.append(f"{where}: closed book (no page retrieved)")
        for m in rec["messages"]:
            if CONTROL.search(m["content"]):
                problems.append(f"{where}: control character in a {m['role']} message")
            if invalid_prompt and invalid_prompt in m["content"]:
                problems.append(f"{where}: the environment's error prompt is in the record")
            if m["role"] == "assistant":
                if parse_fields(m["content"], recipe.grammar)[0] == "invalid":
                    problems.append(f"{where}: a target that breaks the {recipe.grammar.name} format")
                for box in BOX.findall(m["content"]):
                    x1, y1, x2, y2 = (float(v) for v in box.split(","))
                    if min(x1, y1) < 0 or x2 <= x1 or y2 <= y1:
                        problems.append(f"{where}: box [{box}] negative or inverted")
        if name == "evisrag" and sum(m["role"] == "assistant" for m in rec["messages"]) != 1:
            problems.append(f"{where}: not one reply")
    for text in exported["rl"]:
        if CONTROL.search(json.loads(json.dumps(text))):
            problems.append(f"{name}: control character in an RL row")
    assert not problems, "\n".join(problems[:30])
    stopped = Counter(json.loads(x)["reason"][:200] for x in exported["skipped"].splitlines() if x.strip())
    assert per_cell["well_behaved"], f"{name}: the well-behaved episodes were not exported: {stopped.most_common(4)}"
    assert "gate:" in exported["skipped"]  # the gate stopped records, and said why


