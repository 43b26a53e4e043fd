"""Paper rules, third round: VISOR's verification page is the page the teacher analysed (and an off-format reply is
rejected with its reason); RL prompts speak the exported family's coordinates, as the SFT records do; MM-Doc-R1's
seeker and answer agent get one SFT record each, each valid under the recipe's grammar; EVisRAG's own top-3 context
is in the SFT data once; UniDoc-RL's candidate regions are never thinner than the minimum crop; question dedup keeps
questions that differ in a year or a name."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageChops

from tests.support.openai_server import OpenAIServer
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.config import load_config
from vrag_data.env import parse_action
from vrag_data.env.geometry import MIN_CROP
from vrag_data.export import export_run
from vrag_data.filters import Dedup, FilterContext
from vrag_data.recipe import get_recipe
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Trajectory
from vrag_data.store import Workspace, read_records, read_table
from vrag_data.store.run import RunDir
from vrag_data.synth.ledger import read_trajectories
from vrag_data.curate.postprocess import judge_and_filter
from vrag_data.tasks.store import load_tasks
from tests.support.rewards_factory import make_task, make_traj


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    # a workspace of this module's own: the session-wide one gains tasks and runs from other modules on the same
    # worker, and the VISOR check below counts the questions the teacher was shown
    return sample_workspace(tmp_path_factory.mktemp("round3"))


def synth(ws: Path, recipe: str) -> str:
    run = f"round3-{recipe}"
    if not (ws / "runs" / run / "manifest.json").is_file():
        # the offline student for the recipes whose filters need one (synth checks it before any episode)
        cli("synth", "-w", ws, "--recipe", recipe, "--policy", "oracle", "--set", "roles.student.kind=extractive", "--run", run, "-q")
    return run


def export(ws: Path, run: str, family: str, out: Path) -> Path:
    export_run(Workspace(str(ws)), run, ["llamafactory", "verl"], out, model_family=family)
    return out


def sft_rows(out: Path, recipe: str) -> list[dict]:
    return [r for f in sorted((out / "llamafactory" / recipe).glob("*.json")) for r in json.loads(f.read_text())]


def rl_rows(out: Path) -> list[dict]:
    return [r for f in sorted((out / "verl").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


# --------------------------------------------------------------------------- VISOR verification page


def _thumb(img: Image.Image) -> Image.Image:
    return img.convert("L").resize((48, 64))


def _diff(a: Image.Image, b: Image.Image) -> float:
    return sum(ImageChops.difference(a, b).getdata()) / (48 * 64)


@pytest.mark.slow
def test_visor_verification_shows_the_page_the_teacher_analysed(ws, tmp_path):
    from vrag_data.augment.visor import VERIFY_SYSTEM

    run = synth(ws, "visor")
    tasks = sorted(load_tasks(Workspace(str(ws))), key=lambda t: t.task_id)
    thumbs = {p.stem: _thumb(Image.open(p)) for p in (ws / "pages").glob("*.jpg")}
    off_format: list[str] = []  # the first question asked gets a reply without <answer> (whichever task it is: the
    # sample corpus's document ids, and so the tasks' order, change with the PDFs' creation time)
    shown: dict[str, str] = {}  # question -> page id of the image the teacher got

    def reply(req: dict) -> str:
        msgs = req["messages"]
        assert msgs[0]["content"] == VERIFY_SYSTEM, msgs[0]
        parts = msgs[-1]["content"]
        text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
        [uri] = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
        img = _thumb(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))
        ranked = sorted(thumbs, key=lambda pid: _diff(img, thumbs[pid]))
        assert _diff(img, thumbs[ranked[0]]) * 3 < _diff(img, thumbs[ranked[1]])  # one page is clearly the one shown
        question = text.split("Question: ", 1)[1].split("\nEvidence so far:", 1)[0]
        shown[question] = ranked[0]
        answer = text.split("Proposed answer: ", 1)[1].split("\n", 1)[0]
        off_format[:1] = off_format[:1] or [question]
        if question == off_format[0]:  # no <answer>: not a verification
            return f"The extra page agrees, the answer is {answer}."
        return f"<think>The page I was shown is consistent with {answer}.</think>\n<answer>{answer}</answer>"

    with OpenAIServer(reply=reply) as srv:
        cfg_path = tmp_path / "teacher.yaml"
        cfg_path.write_text("roles:\n  policy:\n    kind: openai\n    max_retries: 1\n"
                            f"    endpoints: [{{base_url: '{srv.base_url}', model: teacher}}]\n")
        res = judge_and_filter(Workspace(str(ws)), run, load_config(cfg_path), get_recipe("visor"))
    aug = read_records(str(ws / "runs" / run / "trajectories" / "aug-visor.parquet"), Trajectory)
    by_task = {t.task_id: t for t in tasks}
    assert aug and len(shown) >= len(aug) + 1
    for a in aug:
        page = shown[by_task[a.task_id].question.strip()]
        search = a.turns[-2]
        assert a.extra["verification_page"] == page
        assert [im.page_id for im in search.observation.images] == [page] and a.retrieved_pages[-1] == page
        assert "The page I was shown is consistent with" in a.turns[-1].action.thought
    # the off-format reply built no record and its reason is recorded
    assert off_format and off_format[0] not in {by_task[a.task_id].question.strip() for a in aug}
    assert any("off-format" in s and "0 <answer> tags" in s for s in res.augment_skipped), res.augment_skipped


def test_visor_off_format_replies_are_named():
    from vrag_data.augment.visor import off_format

    assert off_format("<think>fine</think>\n<answer>42</answer>") == ""
    assert off_format("<think>fine</think> it is 42") == "0 <answer> tags, need exactly 1"
    assert off_format("<answer>42</answer>") == "no <think> reasoning"
    assert off_format("<think> </think><answer>42</answer>") == "no <think> reasoning"
    assert off_format("<answer>42</answer><think>why</think>") == "<answer> comes before <think>"
    assert off_format("<think>a</think><answer>1</answer><answer>2</answer>") == "2 <answer> tags, need exactly 1"


# --------------------------------------------------------------------------- RL prompts reworded per family

PIXELS = "pixel coordinates of that image"
NORM = "coordinates from 0 to 1000 relative to the page width and height"


@pytest.mark.slow
@pytest.mark.parametrize(("recipe", "family", "words"), [("unidoc_rl", "qwen2.5-vl", PIXELS), ("vrag_rl", "qwen3-vl", NORM),
                                                          ("visor", "qwen3-vl", NORM)])
def test_rl_prompt_speaks_the_exported_family_like_the_sft_records(ws, tmp_path, recipe, family, words):
    out = export(ws, synth(ws, recipe), family, tmp_path / "out")
    expected = get_recipe(recipe).system_prompt.replace("{coords}", words)  # hand-built: the template, the family's words
    rows = rl_rows(out)
    assert rows
    for row in rows:
        [system] = [m["content"] for m in row["prompt"] if m["role"] == "system"]
        assert system == expected and row["extra_info"]["coord_space"] == family
        other = NORM if words == PIXELS else PIXELS
        assert all(other not in m["content"] for m in row["prompt"])
    sft = sft_rows(out, recipe)
    assert sft and {r["system"] for r in sft} == {expected}


# --------------------------------------------------------------------------- MM-Doc-R1 records per agent


def test_mmdoc_r1_seeker_and_answer_agent_get_a_valid_record_each(ws, tmp_path):
    from pipelines.mmdoc_r1 import ANSWER, SEEKER

    run = synth(ws, "mmdoc_r1")
    trajs = {t.traj_id: t for t in read_trajectories(ws / "runs" / run)}
    tasks = {t.task_id: t for t in load_tasks(Workspace(str(ws)))}
    out = export(ws, run, "qwen2.5-vl", tmp_path / "out")
    rows = sft_rows(out, "mmdoc_r1")
    assert len(rows) == 2 * len(trajs)
    seekers = [r for r in rows if r["system"] == SEEKER]
    answers = [r for r in rows if r["system"] == ANSWER]
    assert len(seekers) == len(answers) == len(trajs)
    texts = []
    for r in rows:
        assistant = [m["content"] for m in r["messages"] if m["role"] == "assistant"]
        kinds = [parse_action(a, "mmdoc_r1").kind for a in assistant]
        assert "invalid" not in kinds, assistant
        if r["system"] == SEEKER:
            assert kinds[-1] == "finish" and "answer" not in kinds
        else:
            assert kinds == ["answer"]
            user = r["messages"][0]["content"]
            texts.append(user)
            q = next(t.question for t in tasks.values() if user.startswith(f"Question: {t.question.strip()}\n"))
            assert user.startswith(f"Question: {q.strip()}\nInformation gathered:\n") and "Read page(s)" in user
    assert any("(OCR):" in u for u in texts)  # the read pages' text reaches the answer agent's record


# --------------------------------------------------------------------------- EVisRAG top-3 context once


@pytest.mark.slow
def test_evisrag_source_context_is_in_the_sft_data_once(ws, tmp_path):
    run = synth(ws, "evisrag")
    student = tmp_path / "student.yaml"
    student.write_text("roles:\n  student: {kind: extractive}\n")
    cli("filter", "-w", ws, "--run", run, "--config", student)
    aug = read_records(str(ws / "runs" / run / "trajectories" / "aug-evisrag.parquet"), Trajectory)
    src = {t.traj_id: t for t in read_trajectories(ws / "runs" / run)}
    assert aug and all(a.extra["shown_pages"] != src[a.extra["source_traj_id"]].extra["shown_pages"] for a in aug)
    assert 3 not in {a.extra["top_k"] for a in aug} and {1, 2} <= {a.extra["top_k"] for a in aug}
    rows = sft_rows(export(ws, run, "qwen2.5-vl", tmp_path / "out"), "evisrag")
    contexts = Counter((r["messages"][0]["content"], tuple(r["images"])) for r in rows)
    assert rows and max(contexts.values()) == 1
    # every 3-page record is a kept source episode (no variant repeats one)
    kept = RunDir(str(ws / "runs" / run)).verdicts()
    assert sum(1 for r in rows if len(r["images"]) == 3) == sum(1 for t in src.values() if kept.keep(t)) > 0


# --------------------------------------------------------------------------- UniDoc-RL candidates >= minimum crop


def _blk(i: int, box: tuple[float, float, float, float], w: int = 1000, h: int = 1400) -> LayoutBlock:
    return LayoutBlock(block_id=f"p_1#{i}", doc_id="d", page_id="p_1", page=1, cls="text", bbox=Box.from_raw(box, w, h),
                       source="pymupdf")


def test_unidoc_candidates_are_never_thinner_than_the_minimum_crop():
    from pipelines.unidoc_rl import candidate_blocks, croppable

    env = get_recipe("unidoc_rl").env
    assert env.min_crop == MIN_CROP == 28
    blocks = [_blk(0, (100, 100, 900, 120)),   # 800 x 20: too thin
              _blk(1, (100, 200, 120, 800)),   # 20 x 600: too narrow
              _blk(2, (100, 900, 500, 1000)),  # 400 x 100
              _blk(3, (600, 900, 640, 940))]   # 40 x 40
    fits = [croppable(b, (1000, 1400), env) for b in blocks]
    assert fits == [False, False, True, True]
    got = candidate_blocks(blocks, 12, fits=lambda b: croppable(b, (1000, 1400), env))
    assert [b.block_id for b in got] == ["p_1#2", "p_1#3"]
    pixels = env.model_copy(update={"coord_space": "qwen2.5-vl"})  # the same rule when boxes are written in pixels
    assert [croppable(b, (1000, 1400), pixels) for b in blocks] == [False, False, True, True]


def test_unidoc_run_offers_only_croppable_regions(ws):
    run = synth(ws, "unidoc_rl")
    rows = read_table(Workspace(str(ws)).corpus_table("layout")).to_pylist()
    size = {r["block_id"]: json.loads(r["bbox"])["raw"] for r in rows}
    thin = {b for b, (x1, y1, x2, y2) in size.items() if x2 - x1 < MIN_CROP or y2 - y1 < MIN_CROP}
    assert thin  # the sample corpus has one-line text blocks thinner than 28 px
    trajs = read_trajectories(ws / "runs" / run)
    offered = [b for t in trajs for c in t.extra.get("candidates", []) for b in c.get("order", [])]
    assert offered and not set(offered) & thin
    # no chosen region became a crop the environment rejects
    assert not [turn.observation.text for t in trajs for turn in t.turns
                if turn.observation is not None and "smaller than" in turn.observation.text]


# --------------------------------------------------------------------------- dedup keeps distinct tasks

Q18 = "According to the annual report, what was the total revenue of Acme in fiscal year 2018, in USD millions?"


@pytest.mark.parametrize("minhash_above", [500, 0])
def test_dedup_keeps_questions_that_differ_in_a_year_or_a_name(minhash_above):
    questions = [
        Q18,
        Q18.replace("2018", "2021"),                   # another year: another task
        Q18.replace("Acme", "Zephyra"),                # another company: another task
        Q18.replace("what was", "what was,"),          # the same question: dropped
        Q18.replace("the total revenue", "total revenue").replace("According", "according"),  # same words: dropped
    ]
    tasks = [make_task(question=q, answer="1", pages=["doc_1"]) for q in questions]
    tasks = [t.model_copy(update={"task_id": f"t{i}"}) for i, t in enumerate(tasks)]
    items = [make_traj(t, [("answer", "1")]).model_copy(update={"task_id": t.task_id, "traj_id": f"tr{i}"})
             for i, t in enumerate(tasks)]
    vs = Dedup(minhash_above=minhash_above).score_all(items, FilterContext(tasks={t.task_id: t for t in tasks}))
    assert [v.passed for v in vs] == [True, True, True, False, False]
    assert "near-duplicate of task t0" in vs[3].reason and "near-duplicate of task t0" in vs[4].reason
