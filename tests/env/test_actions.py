"""The action grammar: every grammar's legal forms, precise reasons for bad ones, total on garbage."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrag_data.env.actions import GRAMMARS, MAX_MESSAGE_CHARS, parse_action, render_action
from vrag_data.schema.records import Action, ReadRequest


def ok(text: str, grammar: str) -> Action:
    a = parse_action(text, grammar)
    assert a.kind != "invalid", a.reason
    return a


def bad(text: str, grammar: str, needle: str) -> str:
    a = parse_action(text, grammar)
    assert a.kind == "invalid", a
    assert needle in a.reason, a.reason
    return a.reason


# --------------------------------------------------------------------------- legal forms


def test_vrag_rl_forms():
    a = ok("<think>I need the revenue table.</think>\n<search>2023 revenue by segment</search>", "vrag_rl")
    assert (a.kind, a.thought, a.query) == ("search", "I need the revenue table.", "2023 revenue by segment")
    a = ok("<think>zoom</think><bbox>[10, 20, 300, 400]</bbox>", "vrag_rl")
    assert a.kind == "crop" and a.boxes == [[10, 20, 300, 400]]
    a = ok("<think>zoom</think><region>[10.5, 20, 300, 400]</region>", "vrag_rl")  # the paper's tag
    assert a.kind == "crop" and a.boxes == [[10.5, 20, 300, 400]]
    a = ok("<think>done</think><answer> Beijing </answer>", "vrag_rl")
    assert (a.kind, a.answer) == ("answer", "Beijing")
    # reasoning written as plain text before the action is kept as the thought
    a = ok("The table is on page 3.\n<search>page 3 table</search>", "vrag_rl")
    assert a.thought == "The table is on page 3."
    # tag names are matched case-insensitively, with stray spaces
    assert ok("<Think>x</Think><ANSWER>y</ANSWER >", "vrag_rl").answer == "y"


def test_bbox_lists_and_qwen_json():
    a = ok("<think>t</think><bbox>[[1, 2, 50, 60], [5, 6, 70, 80]]</bbox>", "unidoc_rl")
    assert a.boxes == [[1, 2, 50, 60], [5, 6, 70, 80]]
    a = ok('<think>t</think><bbox>{"bbox_2d": [1, 2, 50, 60], "label": "table"}</bbox>', "unidoc_rl")
    assert a.boxes == [[1, 2, 50, 60]]
    a = ok('<think>t</think><bbox>[{"bbox_2d": [1, 2, 50, 60]}, {"bbox_2d": [3, 4, 5, 6]}]</bbox>', "unidoc_rl")
    assert len(a.boxes) == 2


def test_unidoc_select():
    assert ok("<think>t</think><select>[1, 3]</select>", "unidoc_rl").indices == [1, 3]
    assert ok("<think>t</think><select>2</select>", "unidoc_rl").indices == [2]
    assert ok("<think>t</think><select>1,2 4</select>", "unidoc_rl").indices == [1, 2, 4]
    bad("<think>t</think><select>first one</select>", "unidoc_rl", "image numbers")
    bad("<think>t</think><select>[1, 1]</select>", "unidoc_rl", "repeats")
    bad("<think>t</think><select>1</select>", "vrag_rl", "not part of the vrag_rl format")


def test_visor_requires_think():
    ok("<think>x</think><search>q</search>", "visor")
    bad("<search>q</search>", "visor", "missing <think>")
    bad("<search>q</search><think>x</think>", "visor", "before the action")


def test_evisrag_structure():
    text = (
        "<observe>Image 1 is a cover. Image 2 lists guests.</observe>\n<evidence>\n[1]: no relevant information\n"
        "[2]: Richard W. Mann is the chief chemist\nat Great Western Sugar.\n</evidence>\n<think>Only image 2 helps.</think>\n"
        "<answer>Richard W. Mann</answer>"
    )
    a = ok(text, "evisrag")
    assert a.kind == "answer" and a.answer == "Richard W. Mann"
    assert a.evidence == ["no relevant information", "Richard W. Mann is the chief chemist\nat Great Western Sugar."]
    assert a.observe.startswith("Image 1")
    bad("<observe>o</observe><think>t</think><answer>a</answer>", "evisrag", "missing <evidence>")
    bad("<evidence>[1]: a</evidence><observe>o</observe><think>t</think><answer>a</answer>", "evisrag", "out of order")
    bad("<observe>o</observe><evidence>[2]: a</evidence><think>t</think><answer>a</answer>", "evisrag", "numbered")
    bad("<observe>o</observe><evidence>a</evidence><think>t</think><answer>a</answer>", "evisrag", "[i]:")
    bad("<observe>o</observe><evidence>[1]:</evidence><think>t</think><answer>a</answer>", "evisrag", "empty")


def test_mmdoc_forms():
    a = ok('I should look for revenue.\n<search>["revenue", "net income"]</search>', "mmdoc_r1")
    assert a.kind == "search" and a.keywords == ["revenue", "net income"] and a.query == ""
    assert a.thought == "I should look for revenue."
    # the paper's fenced tool_code block is no part of the recipe's grammar (bare tags): the fence is text outside them
    bad('I should look for revenue.\n```tool_code\n<search>["revenue", "net income"]</search>\n```', "mmdoc_r1", "outside the tags")
    a = ok('<read>\n[{"page_ids": [4, 5, 8], "query": "segment revenue"}, {"page_ids": [13], "query": "risks"}]\n</read>', "mmdoc_r1")
    assert a.kind == "read"
    assert a.reads == [ReadRequest(page_ids=["4", "5", "8"], query="segment revenue"), ReadRequest(page_ids=["13"], query="risks")]
    assert a.page_ids == ["4", "5", "8", "13"]
    a = ok('<read>{"page_ids": ["report_2"], "query": "q"}</read>', "mmdoc_r1")
    assert a.page_ids == ["report_2"] and a.query == "q"
    assert ok("Enough gathered.\n<FINISH>", "mmdoc_r1").kind == "finish"
    bad("<search>revenue</search>", "mmdoc_r1", "valid JSON")
    bad('<search>[""]</search>', "mmdoc_r1", "empty keyword")
    bad('<read>[{"page_ids": [], "query": "q"}]</read>', "mmdoc_r1", "page_ids")
    bad('<read>[{"page_ids": [0], "query": "q"}]</read>', "mmdoc_r1", "pages start at 1")
    bad('<read>[{"pages": [1], "query": "q"}]</read>', "mmdoc_r1", "exactly the keys")
    bad("<FINISH><search>[\"a\"]</search>", "mmdoc_r1", "2 actions")


def test_json_form():
    a = ok('```json\n{"think": "need data", "search": "revenue 2023"}\n```', "json")
    assert (a.kind, a.thought, a.query) == ("search", "need data", "revenue 2023")
    assert ok('{"search": ["a", "b"]}', "json").keywords == ["a", "b"]
    a = ok('{"think": "t", "bbox": [1, 2, 30, 40], "page_id": "doc_3"}', "json")
    assert a.boxes == [[1, 2, 30, 40]] and a.page_ids == ["doc_3"]
    assert ok('{"select": [2]}', "json").indices == [2]
    assert ok('{"answer": 42}', "json").answer == "42"
    assert ok('{"finish": true}', "json").kind == "finish"
    bad('{"think": "t"}', "json", "no action key")
    bad('{"search": "a", "answer": "b"}', "json", "2 actions")
    bad('{"search": "a", "tool": "x"}', "json", "unknown key")
    bad('{"search": ""}', "json", "non-empty")
    bad("[1, 2]", "json", "one JSON object")
    bad('{"search": "a"', "json", "one JSON object")
    bad('{"bbox": [NaN, 1, 2, 3]}', "json", "not a number")
    bad('{"answer": "x", "page_id": "p"}', "json", "only valid with")


# --------------------------------------------------------------------------- precise reasons


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "empty message"),
        ("   \n", "empty message"),
        ("I think the answer is 4.", "no action found"),
        ("<think>only thinking</think>", "no action found"),
        ("<think>a</think><search>x</search><search>y</search>", "2 actions"),
        ("<think>a</think><search>x</search><answer>y</answer>", "2 actions"),
        ("<think>a</think><think>b</think><search>x</search>", "more than one <think>"),
        ("<think>a</think><search>x", "unclosed <search>"),
        ("<think>a</think><search>x</answer>", "closed by </answer>"),
        ("<think>a</think>x</search>", "without a matching"),
        ("<think>a <answer>b</answer></think>", "nested <answer> inside <think>"),
        ("<think>a</think><search>  </search>", "empty <search>"),
        ("<think>a</think><answer></answer>", "empty <answer>"),
        ("<think>a</think><bbox>[1, 2, 3]</bbox>", "four numbers"),
        ("<think>a</think><bbox>[1, 2, 3, \"x\"]</bbox>", "four numbers"),
        ("<think>a</think><bbox>[1, 2, 3, 1e999]</bbox>", "non-finite"),
        ("<think>a</think><bbox>[1, 2, 3, 4</bbox>", "valid JSON"),
        ("<think>a</think><bbox>[]</bbox>", "a box"),
        ("<think>a</think><bbox>" + "[1,2,3,4]," * 0 + "[" + ",".join(["[1,2,3,4]"] * 9) + "]</bbox>", "too many boxes"),
        ("<think>a</think><read>[]</read>", "not part of the vrag_rl format"),
        ("<think>a</think><search>" + "q" * 2500 + "</search>", "too long"),
    ],
)
def test_invalid_reasons(text, needle):
    bad(text, "vrag_rl", needle)


def test_huge_and_deep_inputs_are_bounded():
    bad("<think>" + "a" * (2 * MAX_MESSAGE_CHARS) + "</think><answer>x</answer>", "vrag_rl", "too long")
    bad("x" * 1_000_000, "json", "too long")
    bad("<bbox>" + "[" * 30_000 + "</bbox>", "vrag_rl", "JSON")
    bad("{" + '"a":' * 10_000 + "1}", "json", "")
    bad("<search>a</search>" * 100, "vrag_rl", "too many tags")


def test_unknown_grammar_is_a_caller_error():
    with pytest.raises(ValueError):
        parse_action("<answer>x</answer>", "vrag")


# --------------------------------------------------------------------------- properties

TOKENS = list("<>/[]{},:\"0123456789 \n") + [
    "<think>", "</think>", "<search>", "</search>", "<bbox>", "</bbox>", "<answer>", "</answer>", "<FINISH>",
    "<select>", "<read>", "</read>", "<observe>", "<evidence>", "[1]: ", "é", "中", "\x00", "🙂",
]
TAGGY = st.lists(st.sampled_from(TOKENS), max_size=80).map("".join)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=300), TAGGY), grammar=st.sampled_from(sorted(GRAMMARS)))
def test_never_raises_on_garbage(text, grammar):
    a = parse_action(text, grammar)
    assert isinstance(a, Action)
    assert (a.kind == "invalid") == bool(a.reason)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(prefix=st.text(max_size=50), cut=st.integers(0, 200), grammar=st.sampled_from(["vrag_rl", "visor", "unidoc_rl"]))
def test_truncated_messages_never_raise(prefix, cut, grammar):
    full = prefix + "<think>look at page 2</think><bbox>[10, 20, 300, 400]</bbox>"
    a = parse_action(full[:cut], grammar)
    assert isinstance(a, Action)


SAFE = st.text(alphabet=st.characters(blacklist_characters="<>\x00[", blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).map(str.strip).filter(bool)
BOX = st.lists(st.integers(0, 2000).map(float), min_size=4, max_size=4)


def _actions(grammar: str):
    thought = SAFE if grammar == "visor" else st.one_of(st.just(""), SAFE)
    kinds = {
        "vrag_rl": ["search", "crop", "answer"],
        "unidoc_rl": ["search", "select", "crop", "answer"],
        "visor": ["search", "crop", "answer"],
        "mmdoc_r1": ["search", "read", "finish", "answer"],
        "json": ["search", "select", "crop", "read", "finish", "answer"],
    }[grammar]

    @st.composite
    def build(draw):
        kind = draw(st.sampled_from(kinds))
        t = draw(thought)
        if kind == "search":
            if grammar == "mmdoc_r1" or (grammar == "json" and draw(st.booleans())):
                return Action(kind="search", thought=t, keywords=draw(st.lists(SAFE, min_size=1, max_size=4)))
            return Action(kind="search", thought=t, query=draw(SAFE))
        if kind == "select":
            return Action(kind="select", thought=t, indices=draw(st.lists(st.integers(0, 20), min_size=1, max_size=5, unique=True)))
        if kind == "crop":
            return Action(kind="crop", thought=t, boxes=draw(st.lists(BOX, min_size=1, max_size=3)))
        if kind == "read":
            reads = draw(st.lists(st.builds(ReadRequest, page_ids=st.lists(st.integers(1, 300).map(str), min_size=1, max_size=3, unique=True), query=SAFE), min_size=1, max_size=3))
            ids: list[str] = []
            for r in reads:
                ids += [p for p in r.page_ids if p not in ids]
            return Action(kind="read", thought=t, reads=reads, page_ids=ids, query=reads[0].query if len(reads) == 1 else "")
        if kind == "finish":
            return Action(kind="finish", thought=t)
        return Action(kind="answer", thought=t, answer=draw(SAFE))

    return build()


@pytest.mark.parametrize("grammar", ["vrag_rl", "unidoc_rl", "visor", "mmdoc_r1", "json"])
def test_parse_render_round_trip(grammar):
    @settings(max_examples=150, deadline=None)
    @given(a=_actions(grammar))
    def check(a):
        text = render_action(a, grammar)
        assert parse_action(text, grammar) == a, text

    check()


@settings(max_examples=150, deadline=None)
@given(obs=SAFE, ev=st.lists(SAFE, min_size=1, max_size=5), t=SAFE, ans=SAFE)
def test_evisrag_round_trip(obs, ev, t, ans):
    a = Action(kind="answer", thought=t, answer=ans, observe=obs, evidence=ev)
    assert parse_action(render_action(a, "evisrag"), "evisrag") == a


def test_render_rejects_what_a_grammar_cannot_say():
    with pytest.raises(ValueError):
        render_action(Action(kind="select", indices=[1]), "vrag_rl")
    with pytest.raises(ValueError):
        render_action(Action(kind="invalid", reason="x"), "json")
    assert render_action(Action(kind="crop", boxes=[[1, 2, 3, 4]]), "vrag_rl") == "<bbox>[1, 2, 3, 4]</bbox>"
