"""A scripted teacher for the local OpenAI-compatible test server: it plays every role of every recipe from
what the request contains (system prompt, last user message, assistant turns so far), and misbehaves on
purpose once per episode (truncated tags, a missing <think>, out-of-range indices and pages, a broken
EVisRAG layout, an answer agent without tags) so the re-prompt paths run through the real client."""

from __future__ import annotations

from typing import Any

ANSWER = "673"
TEACHER_BOX = [10, 20, 300, 200]
GROUNDING_BOX = [40, 60, 300, 200]


def text_of(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(p.get("text", "") for p in c or [] if p.get("type") == "text")


def n_images(m: dict[str, Any]) -> int:
    c = m.get("content")
    return 0 if isinstance(c, str) else sum(1 for p in c or [] if p.get("type") == "image_url")


def teacher(req: dict[str, Any]) -> str:
    msgs = req["messages"]
    system = text_of(msgs[0]) if msgs and msgs[0]["role"] == "system" else ""
    last = text_of(msgs[-1])
    assistants = [text_of(m) for m in msgs if m["role"] == "assistant"]
    n = len(assistants)
    # ---- side roles
    if "grade the answers" in system:
        return "<judge>True</judge>"
    if "You verify an answer" in system:  # VISOR's verification round (augmentation)
        return f"<think>The extra page confirms the figure already found.</think><answer>{ANSWER}</answer>"
    if "Answer the question from the document page images" in system:  # the student (difficulty filters)
        return f"<think>The table on the page gives it.</think><answer>{ANSWER}</answer>"
    if "visual grounding expert" in system:
        return f"<bbox>{GROUNDING_BOX}</bbox>"
    if "You plan how to explore" in system:
        return "Here is my proposed initial plan.\n(1) Search for the company and the figure.\n(2) Read the pages found."
    if "You summarise document pages" in system:
        return f"Visual elements: a table. Relevant: net income 2020 is {ANSWER}. Key finding: {ANSWER}."
    if "Answer the question using only" in system:  # MM-Doc-R1 answer agent: no tags first
        return f"The answer is {ANSWER}." if n == 0 else f"<think>The reader found it.</think><answer>{ANSWER}</answer>"
    # ---- EVisRAG: one user message with the images
    if msgs[0]["role"] == "user" and "four steps" in text_of(msgs[0]):
        k = n_images(msgs[0])
        if n == 0:
            return f"<evidence>\n[1]: something\n</evidence>\n<answer>{ANSWER}</answer>"  # no <observe>: invalid
        lines = "\n".join(f"[{i}]: {'net income 673' if i == 1 else 'no relevant information'}" for i in range(1, k + 1))
        return f"<observe>Image 1 has the table.</observe>\n<evidence>\n{lines}\n</evidence>\n<think>Image 1 says 673.</think>\n<answer>{ANSWER}</answer>"
    # ---- UniDoc-RL candidate step (a side request after a selection)
    if "candidate regions outlined" in last or "<select>[99]</select>" in assistants[-1:]:
        if "<select>[99]</select>" not in assistants:
            return "<select>[99]</select>"  # out of range: re-prompted
        return "<think>Region 1 holds the figure.</think>\n<select>[1]</select>"
    # ---- policies
    if "search engine over a collection" in system:  # VRAG-RL
        script = [
            "<think>I should search.</think>\n<search>Zephyra net income 2020",  # truncated: invalid
            "<think>I should search.</think>\n<search>Zephyra net income 2020</search>",
            f"<think>The table row for net income is small; zoom in.</think>\n<bbox>{TEACHER_BOX}</bbox>",
            f"<think>It reads {ANSWER}.</think>\n<answer>{ANSWER}</answer>",
        ]
        return script[min(n, 3)]
    if "exploring a collection" in system:  # VISOR (sliding window: decide from the last observation)
        if n == 0:
            return "<search>Zephyra net income 2020</search>"  # no <think>: invalid
        if "lies outside the image" in last:
            return f"<think>That box was off the page; the row is near the top left.</think>\n<bbox>{TEACHER_BOX}</bbox>"
        if "That reply was not valid" in last:
            return "<think>I need the financial table.</think>\n<search>Zephyra net income 2020</search>"
        if "zoomed-in region" in last:
            return f"<think>The crop shows {ANSWER}.</think>\n<answer>{ANSWER}</answer>"
        if n_images(msgs[-1]):  # first a box far outside the page (out of range: re-prompted)
            return "<think>The page has a financial table; the row is small.</think>\n<bbox>[5000, 5000, 6000, 6000]</bbox>"
        return f"<think>Answering from the evidence.</think>\n<answer>{ANSWER}</answer>"
    if "<select>[i, j]</select>" in system:  # UniDoc-RL policy
        if n == 0:
            return "<think>Search first.</think>\n<search>Zephyra net income 2020</search>"
        if n == 1:
            return "<think>Candidate 1 looks right.</think>\n<select>[1, 1]</select>"  # repeated index: invalid
        if n == 2:
            return "<think>Candidate 1 looks right.</think>\n<select>[1]</select>"
        return f"<think>The zoomed region shows {ANSWER}.</think>\n<answer>{ANSWER}</answer>"
    if "gather information from one document" in system:  # MM-Doc-R1 seeker
        script = [
            '<think>Find the table.</think>\n<search>["Zephyra", "net income"]</search>',
            '<think>Read it.</think>\n<read>[{"page_ids": [99], "query": "net income 2020"}]</read>',  # no such page
            '<think>Read page 2.</think>\n<read>[{"page_ids": [2], "query": "net income 2020"}]</read>',
            "<think>Enough.</think>\n<FINISH>",
        ]
        return script[min(n, 3)]
    return "ok"
