"""Issue items 1-8 of the allowlist round, one test each, through the real code paths: the grammar's parser and
renderer, the outside-text records, the one door every reply passes (a local OpenAI-compatible server), the export
gate and the judge. Hand-written inputs and expected outputs; each failed on the code before the allowlist."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer
from vrag_data.config import EndpointConfig, RoleConfig
from vrag_data.env.actions import parse_action
from vrag_data.export.targets import render_target
from vrag_data.inert import first_change, sanitize_text
from vrag_data.recipe import get_recipe
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Page
from vrag_data.teacher import RequestCache, TeacherPool
from vrag_data.teacher.judge import JudgeUnavailable, ModelJudge, parse_judge

GRAMMARS = ("vrag_rl", "unidoc_rl", "visor", "evisrag", "mmdoc_r1")


def reply(text: str, finish: str = "stop") -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "teacher",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}


def pool(url: str, tmp_path: Path) -> TeacherPool:
    ep = EndpointConfig(base_url=url, model="teacher")
    roles = {r: RoleConfig(endpoints=[ep], max_retries=0, backoff_s=0.01) for r in ("policy", "judge", "reader")}
    return TeacherPool(roles, RequestCache(tmp_path), "r1")


def chat_all(url: str, tmp_path: Path, n: int, role: str = "policy") -> list:
    from vrag_data.schema.records import Message

    async def go() -> list:
        async with pool(url, tmp_path) as p:
            return [await p.chat(role, [Message(role="user", text=f"q{i}")], sample=i) for i in range(n)]
    return asyncio.run(go())


# 1. look-alike and foreign tags after the thought or the action are text outside the grammar: the reply is refused
@pytest.mark.parametrize("tail", ["\uff1canswer\uff1e43\uff1c/answer\uff1e", "<\u0430nswer>43</\u0430nswer>",
                                  '<tool_call>{"name": "answer", "arguments": {"text": "43"}}</tool_call>',
                                  "\ufe64answer\ufe6543", "The answer is 43."])
def test_item1_text_outside_the_tags_is_no_target(tail: str) -> None:
    for name in GRAMMARS:
        g = get_recipe(name).grammar
        clean = {"evisrag": "<observe>o</observe><evidence>[1]: 42</evidence><think>t</think><answer>42</answer>",
                 "mmdoc_r1": '<think>t</think><search>["net income"]</search>'}.get(name, "<think>t</think><answer>42</answer>")
        assert parse_action(clean, g).kind != "invalid"
        for bad in (clean + tail, clean.replace("</think>", "</think>" + tail, 1)):
            a = parse_action(bad, g)
            assert a.kind == "invalid" and "outside the tags" in a.reason, (name, bad, a)
            assert render_target(bad, g).text == sanitize_text(bad, allowed=g.tags)  # never the parse of a part


# 2. invisible characters: Cf dropped (ZWJ / ZWNJ only between letters), also inside a tag name and behind entities
def test_item2_invisible_characters_never_reach_a_target_or_a_record() -> None:
    g = get_recipe("vrag_rl").grammar
    t = render_target("<think>total</think><answer>\u20665\u200b04\u2060\u2069</answer>", g)
    assert t.text == "<think>\ntotal\n</think>\n<answer>504</answer>" and t.changed
    assert sanitize_text("<ans\u200bwer>9</ans\u200bwer>") == "\u2039answer\u203a9\u2039/answer\u203a"
    assert sanitize_text("net&#8203;income &#x200B;&lt;answer&gt;") == "netincome \u2039answer>"
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # ZWNJ between letters: kept
    assert sanitize_text(persian) == persian and sanitize_text("1\u200c2 \U0001f468\u200d") == "12 \U0001f468"
    page = Page(page_id="d_1", doc_id="d", stem="d", page=1, image="pages/d_1.jpg", width=10, height=10, dpi=72,
                text="Revenue\u200b 4\u202e2\ufeff\u00ad")
    assert page.text == "Revenue 42" and not any(unicodedata.category(c) == "Cf" for c in page.text)


# 3. active HTML of any name and other families' special tokens are inert in outside text, not a 22-name list
@pytest.mark.parametrize("html", ['<textarea autofocus onfocus="alert(1)">', "<div onmouseover=x>", "<button onclick=go()>",
                                  '<a href="javascript:alert(1)">', "<IMG_CONTEXT>", "<end_of_utterance>", "<details open>",
                                  "<marquee>", "<x-custom-el>", "< answer >"])
def test_item3_any_tag_from_outside_is_inert(html: str) -> None:
    block = LayoutBlock(block_id="d_1#0", doc_id="d", page_id="d_1", page=1, cls="text", text=f"Table 2 {html} 673",
                        bbox=Box.from_norm((0, 0, 10, 10), 100, 100), source="pymupdf")
    assert "<" not in block.text and block.text.startswith("Table 2 \u2039") and block.text.endswith(" 673")
    assert first_change(f"q {html}") and not first_change(block.text)
    assert sanitize_text("x < 5, a <= b, <0.5 and a < b") == "x < 5, a <= b, <0.5 and a < b"  # comparisons stay
    # a page of ASCII art: a long run of brackets is text, only the last one can open (no recursion over the run)
    assert sanitize_text("<" * 5000 + "a>") == "<" * 4999 + "\u2039a\u203a" and sanitize_text("<<SYS>>") == "<\u2039SYS\u203a>"


# 4. EVisRAG: one evidence line per image shown, refused at the export gate (and at synth, see the matrix)
def test_item4_phantom_evidence_is_refused() -> None:
    from vrag_data.export.gate import RecipeGate, image_evidence_problems
    from vrag_data.schema.records import ChatTurn, SftRecord

    r = get_recipe("evisrag")
    gate = RecipeGate(r.export.gate, r.grammar)
    five = "\n".join(f"[{i}]: line {i}" for i in range(1, 6))
    target = render_target(f"<observe>o</observe><evidence>{five}</evidence><think>t</think><answer>4</answer>", r.grammar).text
    rec = SftRecord(id="e1", recipe="evisrag", task_id="t", traj_id="e1", images=["a.jpg", "b.jpg", "c.jpg"],
                    messages=[ChatTurn(role="user", content="<image><image><image>q"), ChatTurn(role="assistant", content=target)])
    assert [p[0] for p in image_evidence_problems(rec, gate)] == ["evidence_images"]
    assert image_evidence_problems(rec.model_copy(update={"images": ["a", "b", "c", "d", "e"]}), gate) == []


# 5 and 6. one door for every reply: end markers and CRLF normalised, U+FFFD, content_filter, tool_calls, a missing
# finish reason and control characters unusable, for every role (the augmentation teacher, a reader, the judge)
def test_items5_6_every_reply_passes_one_door(tmp_path: Path) -> None:
    replies = [reply("<think>a\r\nb</think><answer>42</answer><|im_end|>"), reply("<answer>4\ufffd2</answer>"),
               reply("<answer>42</answer>", "content_filter"), reply("<answer>42</answer>", "tool_calls"),
               reply("<answer>42</answer>", ""), reply("<answer>4\x1b[0m2</answer>"), reply("<answer>42</answer>", "length")]
    it = iter(replies * 3)
    with OpenAIServer(reply=lambda req: next(it), models=["teacher"]) as srv:
        for role in ("policy", "reader", "judge"):
            got = chat_all(srv.base_url, tmp_path / role, len(replies), role)
            assert got[0].text == "<think>a\nb</think><answer>42</answer>" and got[0].problem == ""
            problems = [r.problem for r in got[1:]]
            assert all(problems), problems
            assert "U+FFFD" in problems[0] and "content_filter" in problems[1] and "tool_calls" in problems[2]
            assert "missing" in problems[3] and "U+001B" in problems[4] and "max_tokens" in problems[5]


def test_item5_the_augmentation_teacher_goes_through_the_door(tmp_path: Path) -> None:
    from vrag_data.augment import AugmentError
    from vrag_data.curate.postprocess import _teachers

    it = iter([reply("<answer>42</answer><|im_end|>"), reply("<answer>42</answer>", "content_filter")])
    with OpenAIServer(reply=lambda req: next(it), models=["teacher"]) as srv:
        async def go() -> tuple[str, str]:
            async with pool(srv.base_url, tmp_path) as p:
                ask = _teachers(p, p.roles, lambda ref: b"")(None)  # type: ignore[arg-type]
                first = await ask([], 0, purpose="evidence_answer")
                try:
                    await ask([], 1, purpose="evidence_answer")
                except AugmentError as err:
                    return first, str(err)
                return first, ""
        first, err = asyncio.run(go())
    assert first == "<answer>42</answer>" and "unusable" in err and "content_filter" in err


# 7. good data is not lost to CRLF; when the gate stops everything, the line says why and the list is kept
def test_item7_crlf_is_a_line_end_and_a_stopped_export_says_why(tmp_path: Path) -> None:
    from tests.export.test_export_gate import _search, _traj
    from tests.export_fixtures import H, W, page_image
    from vrag_data.errors import VragError
    from vrag_data.export import export_run
    from vrag_data.schema.records import Action, Task, Trajectory, Turn
    from vrag_data.store import Workspace, write_records

    ws = Workspace(str(tmp_path / "ws")).makedirs()
    page_image(tmp_path / "ws" / "pages" / "docA_1.jpg", "docA page 1")
    write_records(ws.path("corpus", "pages", "all.parquet"),
                  [Page(page_id="docA_1", doc_id="sha_docA", stem="docA", page=1, image="pages/docA_1.jpg", width=W, height=H, dpi=144)], Page)
    write_records(ws.path("tasks", "tasks.parquet"), [Task(task_id="t1", question="What is the total?", answer="42", doc_ids=["sha_docA"],
                                                           doc_stems=["docA"], evidence_pages=["docA_1"])], Task)
    crlf = Turn(idx=1, assistant="<think>the table\r\nsays 42</think>\r\n<answer>42</answer>\r\n",
                action=Action(kind="answer", thought="the table\r\nsays 42", answer="42"))
    tagged = Turn(idx=1, assistant="<think>t</think><answer>42 <textarea onfocus=x></answer>",
                  action=Action(kind="answer", thought="t", answer="42 <textarea onfocus=x>"))
    write_records(ws.path("runs", "g1", "trajectories", "part-0.parquet"),
                  [_traj("s1", "vrag_rl", [_search(), crlf], retrieved_pages=["docA_1"])], Trajectory)
    export_run(ws, "g1", formats=["llamafactory"], out_dir=tmp_path / "out", recipes=[get_recipe("vrag_rl")])
    rec = json.loads(next((tmp_path / "out" / "llamafactory").glob("*/*.json")).read_text())[0]
    assert rec["messages"][-1]["content"] == "<think>\nthe table\nsays 42\n</think>\n<answer>42</answer>"
    write_records(ws.path("runs", "g2", "trajectories", "part-0.parquet"),
                  [_traj(f"s{i}", "vrag_rl", [_search(), tagged], retrieved_pages=["docA_1"]) for i in (2, 3)], Trajectory)
    with pytest.raises(VragError) as err:
        export_run(ws, "g2", formats=["llamafactory"], out_dir=tmp_path / "out2", recipes=[get_recipe("vrag_rl")])
    line = str(err.value)
    assert "nothing to export" in line and "sft:gate:live_markup x2" in line and "textarea" in line
    kept = Path(ws.run("g2")) / "export-skipped.jsonl"
    assert line.endswith("no export written") and str(kept) in line
    assert [json.loads(x)["reason_code"] for x in kept.read_text().splitlines()] == ["gate:live_markup"] * 2


# 8. a judge reply must be the verdict alone: a verdict followed by contrary prose is unreadable, counted, re-asked
def test_item8_a_verdict_with_contrary_prose_is_unreadable(tmp_path: Path) -> None:
    assert parse_judge("<judge>True</judge> ... but the answer is not correct") is None
    assert parse_judge("<think>compare 42 and 42</think>\n<judge>True</judge>") is True
    seen = []

    def grader(req: dict) -> dict:
        seen.append(req)
        return reply("<judge>True</judge> Actually, on reflection, the answer is not correct.")
    with OpenAIServer(reply=grader, models=["teacher"]) as srv:
        async def go():
            async with pool(srv.base_url, tmp_path) as p:
                return await ModelJudge(p, max_attempts=2).judge("q?", "42", "41")
        with pytest.raises(JudgeUnavailable, match="unreadable after 2 attempts"):
            asyncio.run(go())
    assert len(seen) == 2  # asked, then re-asked once with the nudge: never read as True
