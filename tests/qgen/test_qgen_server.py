"""`tasks generate` against a scripted local OpenAI-compatible server playing question_writer, answerer
and judge: bad writer replies are rejected with the right reason, good ones become tasks with boxes."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.qgen_workspace import qgen_workspace
from vrag_data.cli.main import app
from vrag_data.config import EndpointConfig, RoleConfig, RunConfig, parse_config
from vrag_data.qgen import generate_tasks, load_rejections
from vrag_data.rewards.answer import normalize_answer
from vrag_data.store.corpus import load_documents
from vrag_data.tasks import load_tasks
from vrag_data.rewards.judge_prompts import unfenced

# a module-wide fixture builds a workspace or serves for tens of seconds: `make test-fast` leaves the module out
pytestmark = pytest.mark.slow

# "{doc}" is filled with the company the writer is told the pages come from (every question names its document)
GOOD = ("What was {doc}'s revenue in 2021, in USD millions?", "5,000")
GOOD2 = ("Which region of {doc} sold the most units in 2020?", "Europe")
AMBIGUOUS = ("What was {doc}'s revenue in 2020 in the selected financial figures, in USD millions?", "1,234")
CLOSED_BOOK = ("Which city is the capital of France, the country where {doc} has no office?", "Paris")
NOT_IN_EVIDENCE = ("How many employees did {doc} have at the end of 1999?", "77")
UNNAMED = ("What was the revenue in 2021, in USD millions?", "5,000")
GOLD = dict([GOOD, GOOD2, AMBIGUOUS, CLOSED_BOOK, NOT_IN_EVIDENCE, UNNAMED])


def _q(q: tuple[str, str], fmt: str = "Str") -> str:
    return json.dumps({"question": q[0], "answer": q[1], "answer_format": fmt, "reasoning_type": "extraction"})


def _template(question: str) -> str:
    """The template a filled question came from."""
    for t in GOLD:
        if re.fullmatch(re.escape(t).replace(re.escape("{doc}"), ".+?"), question):
            return t
    return question


def _company(writer_prompt: str) -> str:
    """The first document name the writer was given ("“Silverline Textiles: Annual report 2020”"), company part."""
    names = writer_prompt.split("(document names, quoted): ", 1)[1].split("\n", 1)[0]
    return json.loads(names.split("; ")[0]).strip("\u201c\u201d").split(":")[0]


def _text(content: Any) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    return " ".join(p["text"] for p in content if p["type"] == "text"), sum(p["type"] == "image_url" for p in content)


class Script:
    """Plays every role; the writer's replies come in order (concurrency 1 keeps attempts in order)."""

    def __init__(self, writer_replies: list[str]) -> None:
        self.writer_replies = list(writer_replies)
        self.writer_images: list[int] = []
        self.answered: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, req: dict[str, Any]) -> str:
        system = req["messages"][0]["content"]
        user, images = _text(req["messages"][-1]["content"])
        with self.lock:
            if system.startswith("You write exam questions"):
                self.writer_images.append(images)
                reply = self.writer_replies.pop(0) if self.writer_replies else '{"decline": "script exhausted"}'
                return reply.replace("{doc}", _company(user))
            if system.startswith("You grade"):
                _, ref, pred = unfenced(user)
                return f"<judge>{normalize_answer(ref) == normalize_answer(pred)}</judge>"
            question = user.removeprefix("Question: ").strip()
            template = _template(question)
            if system.startswith("You answer questions without"):  # closed-book
                return "<answer>Paris</answer>" if template == CLOSED_BOOK[0] else "<answer>about 12</answer>"
            self.answered[question] += 1
            if template == NOT_IN_EVIDENCE[0]:
                return "<answer>Not answerable</answer>"
            if template == AMBIGUOUS[0] or self.answered[question] == 1:  # first look = the evidence pages
                return f"<answer>{GOLD.get(template, 'Not answerable')}</answer>"
            return "<answer>Not answerable</answer>"  # single evidence pages, then the competing pages


def _cfg(base_url: str, **gen: Any) -> RunConfig:
    cfg = parse_config({"tasks": {"generate": {"concurrency": 1, **gen}}})
    cfg.roles["question_writer"] = RoleConfig(endpoints=[EndpointConfig(base_url=base_url, model="teacher")],
                                              max_retries=1, backoff_s=0.01)
    return cfg


def test_scripted_writer_and_judge_reject_bad_questions_with_reasons(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    stem = load_documents(ws)[0].stem
    script = Script([
        _q((f"What was the revenue of {stem} in 2020?", "1")),  # names the document
        "Sure! Here is a good question: what was the revenue in 2020? Answer: 1,234",  # not JSON
        _q(("What figure is reported on page 2 for {doc}'s revenue in 2020?", "1,234")),  # names a page
        _q(UNNAMED, "Int"),  # does not say which document (company, report, year) it is about
        _q(AMBIGUOUS, "Int"),
        _q(CLOSED_BOOK),
        _q(NOT_IN_EVIDENCE, "Int"),
        _q(GOOD, "Int"),
        '{"decline": "nothing worth asking in this region"}',
        # near-duplicate of GOOD: the same document (attempts 7 and 9 both draw evidence from one report)
        _q(("What was {doc}'s revenue in 2021 in USD millions?", "5,000"), "Int"),
        _q(GOOD2),
    ])
    with OpenAIServer(reply=script) as srv:
        s = generate_tasks(ws, _cfg(srv.base_url, max_attempts=20), n=2, kinds=["single", "multi_page"],
                           writer="model")
        chat = [r for r in srv.requests if r.path.endswith("/chat/completions")]
        assert s.writer == "teacher" and s.verify_mode == "model"
        assert (s.attempted, s.kept) == (11, 2)
        rej = sorted((r for r in load_rejections(ws) if r.run_id == s.run_id), key=lambda r: r.attempt)
        assert [(r.attempt, r.reason) for r in rej] == [
            (0, "names_document"), (1, "invalid_json"), (2, "names_page"), (3, "unnamed_document"), (4, "ambiguous"),
            (5, "answerable_closed_book"), (6, "not_answerable_from_evidence"), (8, "writer_declined"),
            (9, "near_duplicate")]
        assert "non-evidence pages" in rej[4].detail and all(r.requests >= 1 for r in rej)
        # every request reached the server once; the only repeat (judging the same answer to the ambiguous
        # question twice) came from the request cache
        assert s.requests == len(chat) and s.calls == len(chat) + 1
        # the writer saw one outlined page per evidence page: 1 for single, 2 for multi_page attempts; once the
        # multi_page task is kept (attempt 7) that kind has its share of --n 2 and later attempts ask for single
        assert script.writer_images == [1, 2, 1, 2, 1, 2, 1, 2, 1, 1, 1]
        tasks = {_template(t.question): t for t in load_tasks(ws)}
        assert set(tasks) == {GOOD[0], GOOD2[0]}
        for t in tasks.values():
            assert t.benchmark == "generated" and t.answer == GOLD[_template(t.question)] and t.extra["writer"] == "teacher"
            assert t.extra["documents"] and all(t.extra["documents"])
            assert t.evidence_boxes and {b.page_id for b in t.evidence_boxes} == set(t.evidence_pages)
            assert t.extra["verify"]["mode"] == "model" and t.extra["competing_pages"]

        # Re-running replays every call from the run's request cache: nothing new reaches the server.
        again = generate_tasks(ws, _cfg(srv.base_url, max_attempts=20), n=2, kinds=["single", "multi_page"],
                               writer="model")
        assert (again.kept, again.already) == (0, 2) and again.requests == 0
        assert len([r for r in srv.requests if r.path.endswith("/chat/completions")]) == len(chat)


def test_cli_with_writer_url(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    cfg = tmp_path / "gen.yaml"
    cfg.write_text(yaml.safe_dump({"tasks": {"generate": {"concurrency": 1, "max_attempts": 3}}}))
    with OpenAIServer(reply=Script([_q(GOOD, "Int")])) as srv:
        r = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--config", str(cfg), "--n", "1",
                                     "--kinds", "single", "--writer-url", srv.base_url, "--writer-model", "teacher"])
    assert r.exit_code == 0, r.output
    assert "kept 1 of 1" in r.output and "writer teacher, verification model" in r.output
    assert [_template(t.question) for t in load_tasks(ws)] == [GOOD[0]]


def test_unreachable_writer_is_one_clear_error(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    r = CliRunner().invoke(app, ["tasks", "generate", "-w", ws.root, "--n", "1", "--writer-url",
                                 "http://127.0.0.1:9/v1", "--writer-model", "teacher"])
    assert r.exit_code != 0 and "unreachable" in r.output and "Traceback" not in r.output


def test_writer_option_names_only_the_oracle(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["tasks", "generate", "-w", str(tmp_path), "--writer", "gpt"])
    assert r.exit_code == 2 and "oracle" in r.output
