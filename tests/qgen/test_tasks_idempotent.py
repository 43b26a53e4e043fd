"""The tasks stage tops up to `tasks.generate.n`: run again with other role settings, it adds no question; with a
larger n it adds the difference. The question writer and verifier are a scripted OpenAI-compatible server on
127.0.0.1 that writes a new question on every call (as a model does when its settings change)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_server import OpenAIServer
from tests.support.qgen_workspace import qgen_workspace
from vrag_data.config import parse_config
from vrag_data.rewards.judge_prompts import unfenced
from vrag_data.tasks import load_tasks
from vrag_data.qgen.topup import top_up

# a question per writer call, each about another year (no two are near-duplicates); "{doc}" = the company
YEARS = [2011, 2012, 2013, 2014, 2015, 2016, 2017, 2018]


class Writer:
    """Writes question i on its i-th call; answers from pages with the gold, closed-book wrongly; judges equal."""

    def __init__(self) -> None:
        self.written = 0
        self.gold: dict[str, str] = {}
        self.answered: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, req: dict[str, Any]) -> str:
        system = req["messages"][0]["content"]
        last = req["messages"][-1]["content"]
        user = last if isinstance(last, str) else " ".join(p["text"] for p in last if p["type"] == "text")
        with self.lock:
            if system.startswith("You write exam questions"):
                names = user.split("(document names, quoted): ", 1)[1].split("\n", 1)[0]
                company = json.loads(names.split("; ")[0]).strip("\u201c\u201d").split(":")[0]
                year = YEARS[self.written]
                self.written += 1
                q = f"How many stores did {company} run at the end of {year}?"
                self.gold[q] = str(year - 1990)
                return json.dumps({"question": q, "answer": self.gold[q], "answer_format": "Int",
                                   "reasoning_type": "extraction"})
            if system.startswith("You grade"):
                _, ref, pred = unfenced(user)
                return f"<judge>{ref.strip() == pred.strip()}</judge>"
            if system.startswith("You answer questions without"):
                return "<answer>about 12</answer>"
            q = user.removeprefix("Question: ").strip()
            self.answered[q] = self.answered.get(q, 0) + 1
            first = self.answered[q] == 1  # the first look is at the evidence pages; the competing pages say nothing
            return f"<answer>{self.gold.get(q, 'Not answerable')}</answer>" if first else "<answer>Not answerable</answer>"


def _cfg(url: str, n: int, temperature: float) -> Any:
    writer = {"endpoints": [{"base_url": url, "model": "teacher"}], "sampling": {"temperature": temperature},
              "max_retries": 1, "backoff_s": 0.01}
    return parse_config({"tasks": {"generate": {"n": n, "concurrency": 1, "kinds": ["single"], "max_attempts": 8}},
                         "roles": {"question_writer": writer}})


@pytest.mark.slow  # a real ingest of the sample corpus and verification by the scripted server: minutes on a busy CI
def test_changed_roles_add_no_questions_and_a_larger_n_adds_the_difference(tmp_path: Path) -> None:
    ws = qgen_workspace(tmp_path / "ws")
    script = Writer()
    with OpenAIServer(reply=script) as srv:
        first = top_up(ws, _cfg(srv.base_url, 2, 0.7), "model")
        assert (first.had, first.added, len(load_tasks(ws)), script.written) == (0, 2, 2, 2)

        # other sampling for the writer: another run id, so its calls are not replayed from the request cache;
        # the workspace already holds the 2 questions the config asks for
        again = top_up(ws, _cfg(srv.base_url, 2, 0.2), "model")
        assert (again.had, again.added, again.summary) == (2, 0, None)
        assert len(load_tasks(ws)) == 2 and script.written == 2  # no writer call at all

        more = top_up(ws, _cfg(srv.base_url, 3, 0.2), "model")  # n is the total: one more
        assert (more.had, more.added, more.total) == (2, 1, 3)
    assert len(load_tasks(ws)) == 3 and script.written == 3
