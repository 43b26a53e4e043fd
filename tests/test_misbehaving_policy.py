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

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.support.openai_server import BehaviourMode, Call, OpenAIServer
from tests.support.synth_workspace import sample_workspace
from vrag_data.config import RunConfig
from vrag_data.recipe import resolve_recipe
from vrag_data.store.workspace import Workspace
from vrag_data.synth.ledger import read_trajectories
from vrag_data.synth.run import synth
from vrag_data.tasks.store import load_tasks

BUDGET = 3  # synth.recipe_options.<recipe>.max_turns
TASKS = 2
SEED = 1000  # sampling seed of every role: the server reads the sample index (= behaviour) from seed - SEED
BEHAVIOURS = ["answer_first", "never_answers", "repeat_search", "crop_outside", "invalid_markup", "empty", "blank",
              "ramble", "wrong_coords", "tool_call", "no_think"]
RAMBLE = ("Let me think about this question once more, carefully and from the very beginning, weighing every "
          "possibility before I commit to anything at all. ") * 250  # ~32k characters, ~8k tokens, no digits, no tags
ANSWER = "42"


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


def policy(call: Call, recipe: str) -> str:
    """The misbehaving policy. Its thoughts restate the question, so that side requests that carry only the
    thought (the grounding expert's) are attributed to their episode."""
    b, n, q = call.behaviour, call.n, call.episode
    think = f"<think>The question is: {q} Step {n}.</think>\n"
    mm = recipe == "mmdoc_r1"
    search = (f'<search>["net income", "step {n}"]</search>' if mm else f"<search>Zephyra net income step {n}</search>")
    box = "[100, 100, 500, 400]" if recipe == "unidoc_rl" else "[10, 20, 300, 200]"
    if recipe == "evisrag":  # one reply over the shown pages; every behaviour breaks its four-tag form
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
    raise AssertionError(f"unknown behaviour {b}")


def script(call: Call) -> str:
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


@pytest.mark.parametrize("name", RECIPES)
def test_every_episode_ends_within_budget_whatever_the_policy_writes(ws, name):
    questions = [t.question for t in load_tasks(Workspace(str(ws)), TASKS)]
    mode = BehaviourMode(BEHAVIOURS, script, phase_of, questions, seed_base=SEED, limit=4 * (BUDGET + 1))
    with OpenAIServer(reply=mode, models=["policy-m", "grounding-m", "planner-m", "reader-m", "judge-m", "student-m"]) as srv:
        probe = resolve_recipe(name)
        cfg = run_config(srv.base_url, probe.role_names, name)
        recipe = resolve_recipe(name, cfg)
        res = synth(ws, cfg, recipe, run_id=f"misbehave-{name}", samples=len(BEHAVIOURS), limit=TASKS, progress=False)
        n_requests = len(srv.requests)
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
    # the request cache holds one row per call: ~34 KB at most each (the ramble), bounded by the turn cap
    db = Path(res.run_dir) / "requests.sqlite"
    with sqlite3.connect(db) as con:
        rows, chars = con.execute("SELECT count(*), coalesce(sum(length(text)), 0) FROM responses").fetchone()
    assert rows == n_requests  # every reply cached, the empty ones too: a resume pays for none of them again
    assert chars <= rows * len(RAMBLE)
    # the rambles dominate: 2 tasks x at most 7 calls (MM-Doc-R1: planner 1 + seeker 4 + answer agent 2) x 32.5 KB
    # = 455 KB; everything else is a few hundred bytes per row (measured: 0.4-0.65 MB per recipe)
    size = sum(f.stat().st_size for f in db.parent.glob("requests.sqlite*"))
    assert size < 1 << 20, size

