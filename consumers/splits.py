"""Which task a consumer trained on, read from what the consumer itself built (imported by the check scripts, inside
each consumer's environment).

The consumers build (build_exports.py) imports every `TEST_EVERY`-th sample question with `--split test` and writes,
before its workspace goes, `<out>/_splits.json`: task id -> {split, question}. A check script finds the questions in
the text its consumer would feed a model (decoded token ids, a rendered prompt) and reports the task ids it found;
the test then asserts that none of them is a test task, and that the search found something (a search that can find
nothing proves nothing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SPLITS_FILE = "_splits.json"
ENV = "VRAG_SPLITS"  # the check scripts read the file it names


def load(path: str | Path | None = None) -> dict[str, dict]:
    """task id -> {"split", "question"}; empty when no file is named (an export built without held-out tasks)."""
    path = path or os.environ.get(ENV)
    return json.loads(Path(path).read_text()) if path else {}


def tasks_in(text: str, splits: dict[str, dict]) -> set[str]:
    """The tasks whose question `text` holds."""
    return {tid for tid, t in splits.items() if t["question"] and t["question"] in text}


def report(found: list[set[str]], splits: dict[str, dict]) -> dict:
    """A check's finding over the items of one training set: task ids found, test ones apart, items matching none."""
    seen = set().union(*found) if found else set()
    return {"tasks": sorted(seen), "test_tasks": sorted(t for t in seen if splits[t]["split"] == "test"),
            "unmatched_items": sum(1 for f in found if not f)}
