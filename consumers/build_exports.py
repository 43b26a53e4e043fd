"""Build every recipe's export on the sample corpus (oracle policy, offline student), then copy the exports
to a new folder and delete the workspace: what the consumer checks read is a moved export with nothing
behind it.

    python consumers/build_exports.py <out>      ->  <out>/<recipe>/{llamafactory,verl,easyr1,hf,reward,...}
                                                     <out>/_for_vragrl/<recipe>/verl (`--for vragrl`)
                                                     <out>/_splits.json (task id -> split, question)

Every `TEST_EVERY`-th question of the sample corpus is imported with `--split test`, as a user imports a
benchmark's test set: the consumer checks show, with each consumer's own code, that none reaches a training file.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consumers.splits import SPLITS_FILE  # noqa: E402
from tests.support.synth_workspace import cli  # noqa: E402
from vrag_data.recipe import get_recipe, recipe_names  # noqa: E402
from vrag_data.schema.records import Task  # noqa: E402
from vrag_data.store import Workspace, read_records  # noqa: E402


VRAGRL = "_for_vragrl"  # <out>/_for_vragrl/<recipe>: `--for vragrl` exports
TEST_EVERY = 4  # questions 0, 4, 8, ... of the sample corpus are imported as a test split


def workspace_with_test_tasks(base: Path) -> tuple[Path, dict[str, dict]]:
    """The sample corpus ingested, its questions imported in two files (the test one with `--split test`), indexed.
    Returns the workspace and task id -> {split, question} as the workspace holds them."""
    corpus, ws = base / "corpus", base / "ws"
    cli("sample-corpus", corpus, "--docs", "2", "--seed", "0")
    cli("ingest", "-w", ws, corpus, "--ocr", "off", "--workers", "1", "--quiet")
    rows = (corpus / "qa.jsonl").read_text().splitlines()
    (corpus / "train.jsonl").write_text("".join(r + "\n" for i, r in enumerate(rows) if i % TEST_EVERY))
    (corpus / "test.jsonl").write_text("".join(r + "\n" for i, r in enumerate(rows) if not i % TEST_EVERY))
    cli("tasks", "import", corpus / "train.jsonl", "-w", ws)
    cli("tasks", "import", corpus / "test.jsonl", "-w", ws, "--split", "test")
    cli("index", "-w", ws)
    tasks = {t.task_id: {"split": t.split or "train", "question": t.question} for t in read_records(Workspace(str(ws)).tasks, Task)}
    questions = [t["question"] for t in tasks.values()]
    assert len(set(questions)) == len(questions), "two sample tasks ask the same question: a check could not tell them apart"
    assert {t["split"] for t in tasks.values()} == {"train", "test"}
    return ws, tasks


def build(out: Path) -> list[str]:
    recipes = list(recipe_names())
    with tempfile.TemporaryDirectory(prefix="vrag-consumers-") as tmp:
        base = Path(tmp)
        ws, splits = workspace_with_test_tasks(base)
        student = base / "student.yaml"
        student.write_text("roles:\n  student: {kind: extractive}\n")
        staged = base / "exports"
        for recipe in recipes:
            run = f"oracle-{recipe}"
            cli("synth", "-w", ws, "--recipe", recipe, "--policy", "oracle", "--run", run, "--config", student, "-q")
            cli("filter", "-w", ws, "--run", run, "--config", student)
            cli("export", "-w", ws, "--run", run, "--out", staged / recipe,
                "--format", "hf", "--format", "llamafactory", "--format", "verl", "--format", "easyr1")
            # VRAG-RL's fork reads only embedded image bytes: the same run exported for it (not for a recipe whose
            # loop the fork cannot run: its export refuses `--for vragrl` in one line, tested in tests/)
            if "vragrl" not in get_recipe(recipe).export.not_for:
                cli("export", "-w", ws, "--run", run, "--out", staged / VRAGRL / recipe, "--format", "verl", "--for", "vragrl")
        (staged / SPLITS_FILE).write_text(json.dumps(splits, indent=1))
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staged, out)  # the workspace and the staged exports go away with `tmp`
    return recipes


if __name__ == "__main__":
    print(" ".join(build(Path(sys.argv[1]).resolve())))
