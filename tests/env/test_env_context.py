"""Context policies: append-only history and VISOR's rebuilt context."""

from __future__ import annotations

import pytest

from tests.env.test_env import make_env
from vrag_data.env import AppendOnly, VisorContext, VisorPrompts, parse_action
from vrag_data.schema.records import Message, Turn

PROMPT = [Message(role="system", text="You are a document agent."), Message(role="user", text="Question: What was Alpha's 2023 cloud revenue?")]


def run(env, texts: list[str]) -> list[Turn]:
    turns = []
    for i, text in enumerate(texts):
        a = parse_action(text, env.grammar)
        r = env.step(a)
        turns.append(Turn(idx=i, assistant=text, action=a, observation=None if r.done else r.observation))
        if r.done:
            break
    return turns


def roles(msgs: list[Message]) -> list[str]:
    return [m.role for m in msgs]


def test_append_only_keeps_everything_in_order():
    env = make_env()
    turns = run(env, ["<think>a</think><search>cloud revenue segment</search>", "<think>b</think><search>annual cover</search>", "<think>c</think><answer>40</answer>"])
    msgs = AppendOnly().build(PROMPT, turns, env.state)
    assert roles(msgs) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert msgs[2].text == turns[0].assistant
    assert [i.page_id for i in msgs[3].images] == ["alpha_2"]
    assert msgs[-1].text.endswith("<answer>40</answer>")
    assert msgs[:2] == PROMPT  # the prompt is not modified


def test_visor_window_evidence_and_intent():
    env = make_env(grammar="visor", coord_space="norm1000")
    turns = run(
        env,
        [
            "<think>Start.</think><search>annual report cover</search>",
            "<think>Cover page of Alpha, no numbers.</think><search>cloud revenue segment</search>",
            "<think>Segment table: cloud 40.</think><bbox>[0, 0, 600, 400]</bbox>",
        ],
    )
    ctx = VisorContext(window=2)
    msgs = ctx.build(PROMPT, turns, env.state)
    # prompt + last 2 turns only, alternation kept
    assert roles(msgs) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2].text == turns[1].assistant and msgs[4].text == turns[2].assistant
    # the evidence space is pinned under the question and holds the notes of every page seen, even evicted ones
    head = msgs[1].text
    assert head.startswith("Question: What was Alpha's 2023 cloud revenue?")
    assert "alpha_1: Cover page of Alpha, no numbers." in head and "alpha_2: Segment table: cloud 40." in head
    # every observation restates the question (intent injection)
    for m in (msgs[3], msgs[5]):
        assert "Keep the question in mind: What was Alpha's 2023 cloud revenue?" in m.text
    # a page observation carries the crop evaluation gate, a crop observation the correction prompt
    assert "Only if a detail you need is too small" in msgs[3].text
    assert "must be <search> or <answer>, not another crop" in msgs[5].text
    assert msgs[5].images[0].box is not None
    # the stored turns are untouched
    assert "Keep the question in mind" not in (turns[1].observation.text or "")


def test_visor_verification_hint_and_no_image_prompt():
    env = make_env(grammar="visor")
    turns = run(
        env,
        [
            "<think>Start.</think><search>cloud revenue segment</search>",
            "<think>Cloud is 40. Let me verify with one more search.</think><search>revenue outlook risk</search>",
            "<think>Page 3 agrees.</think><search>risk factors</search>",
        ],
    )
    msgs = VisorContext().build(PROMPT, turns, env.state)
    verify_obs = msgs[3]
    assert "looks like your verification search" in verify_obs.text
    assert "Only if a detail" not in verify_obs.text
    last = msgs[5]
    assert turns[2].observation.kind == "info" and not last.images
    assert last.text.startswith("There are no new pages for this search")
    assert "alpha_2: Cloud is 40. Let me verify with one more search." in last.text


def test_visor_forced_answer_replaces_plain_prompt():
    env = make_env(grammar="visor", max_turns=2)
    turns = run(env, ["<think>Start.</think><search>cloud revenue segment</search>", "<think>More.</think><search>annual cover</search>"])
    assert env.state.forced
    msgs = VisorContext(window=2, prompts=VisorPrompts(forced_answer="FINAL NOW.\n{evidence}")).build(PROMPT, turns, env.state)
    last = msgs[-1].text
    assert "FINAL NOW." in last
    assert env.settings.prompts.forced_answer not in last  # the environment's plain version was replaced
    # append-only keeps the environment's own forced-answer text
    assert AppendOnly().build(PROMPT, turns, env.state)[-1].text.endswith(env.settings.prompts.forced_answer)


def test_visor_window_one_and_empty_history():
    env = make_env(grammar="visor")
    msgs = VisorContext().build(PROMPT, [], env.state)
    assert roles(msgs) == ["system", "user"] and "(nothing yet)" in msgs[1].text
    turns = run(env, ["<think>a</think><search>cloud revenue segment</search>", "<think>b</think><search>annual cover</search>"])
    msgs = VisorContext(window=1).build(PROMPT, turns, env.state)
    assert roles(msgs) == ["system", "user", "assistant", "user"] and msgs[2].text == turns[1].assistant
    with pytest.raises(ValueError):
        VisorContext(window=0)
