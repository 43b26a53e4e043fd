"""A sixth recipe that brings every kind of extension at once, each one class of test code and one registration line:
its own role (a checker that confirms the final answer: the run config knows the role because the recipe declares
it, and `--policy oracle` fills it in as the RoleSpec says), its own reward, its own filter (keeps what the checker
confirmed) and its own layout backend (the boxed facts its oracle crops). It runs as a user types it: `ingest
--layout`, `synth --policy oracle`, `filter`, `export`, then the trainer's reward entry point on the exported rows.
No library file names any of them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pymupdf
import pytest
from typer.testing import CliRunner

from vrag_data.cli.main import app
from vrag_data.config import parse_config
from vrag_data.env.grammar import REACT_CROP
from vrag_data.errors import ConfigError
from vrag_data.filters import FILTERS, FilterContext, KeepPassed, Structure, register_filter, verdict
from vrag_data.filters import Correctness
from vrag_data.ingest import backends as backend_registry
from vrag_data.ingest.backends import LayoutBackend, PageLayout, RawBlock, register_backend
from vrag_data.recipe import ExportHints, OracleSpec, Recipe, RewardSpec, RoleSpec, SftHints, base_env, register, unregister
from vrag_data.rewards import registry as reward_registry
from vrag_data.rewards.format import tag_contents
from vrag_data.rewards.registry import Reward, RewardBreakdown, judge_or_rules, register_reward, weighted
from vrag_data.rewards.verl import compute_score
from vrag_data.schema.records import Message, Trajectory, Verdict
from vrag_data.env.geometry import box_to_model
from vrag_data.store import Workspace, read_records
from vrag_data.store.corpus import load_layout, load_pages
from vrag_data.store.run import RunDir

FACTS = [("North", "412"), ("South", "389"), ("West", "275")]


# --------------------------------------------------------------------------- its layout backend (one class)
class BoxedFacts(LayoutBackend):
    """The figure inside each ruled rectangle of a page is one block (the smallest block holding it: what the oracle
    crops)."""

    name = "boxed_facts"
    block_sources = {"boxed": 0}
    per_page = True

    def page_layout(self, page: Any, words: list) -> PageLayout:
        blocks = []
        for rect in (d["rect"] for d in page.get_drawings() if d.get("rect") is not None):
            figures = [w for w in page.get_text("words", clip=rect) if w[4].isdigit() and len(w[4]) == 3]
            if figures:
                x0, y0, x1, y1, text = figures[0][:5]
                blocks.append(RawBlock(rect=(x0, y0, x1, y1), cls="text", source="boxed", text=text))
        return PageLayout(blocks=blocks)


# --------------------------------------------------------------------------- its reward (one class)
class CheckedAnswer(Reward):
    """Three quarters for the right answer, a quarter for an answer of at most `max_chars` characters."""

    name = "checked_answer"
    weights = {"correct": 0.75, "brief": 0.25}
    params = {"max_chars": 12.0}
    judged = True

    def format_score(self, texts: list[str]) -> float:
        return float(bool(tag_contents("\n".join(texts), "answer")))

    def score(self, ep: Any, gold: Any, w: dict, p: dict, judge_score: float | None, honesty_score: float | None) -> RewardBreakdown:
        comps = {"correct": judge_or_rules(ep, gold, judge_score), "brief": float(len(ep.final_answer or "") <= p["max_chars"])}
        return RewardBreakdown(self.name, comps, w, weighted(comps, w))


# --------------------------------------------------------------------------- its filter (one class)
@dataclasses.dataclass
class CheckerAgreed(KeepPassed):
    """Keeps a trajectory whose final answer the checker role confirmed."""

    name: str = "checker_agreed"

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        notes = item.extra.get("checker") or []
        ok = bool(notes) and all(n.get("agrees") for n in notes)
        return verdict(item, self.name, ok, f"checker: {notes[-1]['reply'][:60] if notes else 'never asked'}")


# --------------------------------------------------------------------------- its role and the recipe
def _checker_oracle(ep: Any) -> str:
    return f"CONFIRMED: {ep.task.answer}"


class CheckedRecipe(Recipe):
    """A ReAct loop with crops whose final answer a second role re-reads."""

    async def finish(self, ep: Any) -> None:
        answer = next((t.action.answer for t in reversed(ep.turns) if t.action.kind == "answer"), None)
        if answer is None:
            return
        msgs = [Message(role="user", text=f"Question: {ep.task.question}\nProposed answer: {answer}\n"
                                          "Reply `CONFIRMED: <answer>` or `REJECTED`.")]
        reply = await ep.ask("checker", msgs, "checker")
        ep.note("checker", {"reply": reply.text, "agrees": reply.text.strip() == f"CONFIRMED: {answer}"})


def make_recipe() -> Recipe:
    return CheckedRecipe(
        name="checked_crop",
        paper="a test recipe",
        grammar=dataclasses.replace(REACT_CROP, name="checked_crop"),
        system_prompt=("Answer from document page images. Think inside <think></think>, then write one of "
                       "<search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> (pixels of the last page) or <answer>answer</answer>."),
        user_template="Q: {question}",
        env=base_env(coord_space="qwen2.5-vl", page_max_pixels=200704, search_mode="first_unseen", top_k=1, scope="corpus", max_turns=6),
        roles=(RoleSpec("policy", "takes every action"),
               RoleSpec("checker", "re-reads the final answer and confirms it", oracle=_checker_oracle)),
        filters=(Structure(max_retrievals=5), Correctness(threshold=0.5), CheckerAgreed()),
        reward=RewardSpec("checked_answer", scopes={"answer": ("correct",), "other": ("brief",)}),
        export=ExportHints(max_pixels=200704, data_source="checked_source", sft=SftHints(8192, 2.0e-5, 2.0, 1, "the test's own")),
        oracle=OracleSpec(style="react", crop_gold=True),
    )


# --------------------------------------------------------------------------- the registration lines
@pytest.fixture(scope="module")
def extended():
    register_backend(BoxedFacts)
    register_reward(CheckedAnswer)
    register_filter("checker_agreed", CheckerAgreed)
    recipe = register(make_recipe())
    yield recipe
    unregister(recipe.name)
    FILTERS.pop("checker_agreed", None)
    reward_registry.REWARDS.unregister("checked_answer")
    backend_registry.BACKENDS.unregister("boxed_facts")


def cli(*args: Any) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, f"vrag-data {' '.join(map(str, args))} failed ({res.exit_code}): {res.output}"
    return res.output


def _corpus(folder: Path) -> Path:
    """Two one-page reports, each fact in a ruled box; one question per fact."""
    folder.mkdir(parents=True)
    rows = []
    for d, year in enumerate((2023, 2024)):
        doc = pymupdf.open()
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 90), f"Regional report {year}. Revenue by region, in millions of dollars.", fontsize=12)
        for i, (region, value) in enumerate(FACTS):
            v = str(int(value) + d * 10)
            y = 160 + 90 * i
            page.draw_rect(pymupdf.Rect(72, y, 420, y + 40), color=(0, 0, 0), width=1)
            page.insert_text((84, y + 25), f"{region} region revenue {year}: {v} million", fontsize=12)
            rows.append({"id": f"q{d}{i}", "question": f"What was the {region} region revenue in {year}, in millions?",
                         "answer": v, "doc_id": f"report{year}.pdf", "evidence_pages": [1], "answer_format": "Int"})
        doc.save(folder / f"report{year}.pdf")
    (folder / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.mark.slow
def test_a_sixth_recipe_with_its_own_role_reward_filter_and_backend_runs_every_stage(extended, tmp_path):
    corpus, ws = _corpus(tmp_path / "corpus"), tmp_path / "ws"
    cli("ingest", "-w", ws, corpus, "--layout", "boxed_facts", "--ocr", "off", "--workers", "1", "--quiet")
    cli("tasks", "import", corpus / "qa.jsonl", "-w", ws)
    cli("index", "-w", ws)
    cli("synth", "-w", ws, "--recipe", "checked_crop", "--policy", "oracle", "--run", "six", "-q")
    run = RunDir(str(ws / "runs" / "six"))
    # the oracle's companions, spelled out in the manifest: the checker plays as the policy (its RoleSpec says so)
    roles = run.manifest().config["roles"]
    assert roles["checker"]["same_as"] == "policy" and roles["judge"]["kind"] == "rules"
    episodes = list(run.episodes())
    assert len(episodes) == 6 and all(t.status == "answered" for t in episodes)
    # the role was asked once per episode and answered by the recipe's own oracle rule
    assert all(t.extra["checker"][-1]["agrees"] and t.extra["calls"].get("checker") == 1 for t in episodes)
    # each crop is the backend's block of the figure asked for, in the recipe's coordinates
    w = Workspace(str(ws))
    pages = {p.page_id: p for p in load_pages(w)}
    boxed = [b for b in load_layout(w) if b.source == "boxed"]
    assert len(boxed) == 6
    for t in episodes:
        crop = next(turn for turn in t.turns if turn.action.kind == "crop")
        page_id = next(o["page_id"] for o in t.extra["oracle"] if o.get("crop") == "layout_block")
        block = next(b for b in boxed if b.page_id == page_id and b.text == t.final_answer)
        page = pages[page_id]
        want = box_to_model(block.bbox, "qwen2.5-vl", (page.width, page.height), extended.env.resize_rule())
        assert [round(v) for v in crop.action.boxes[0]] == want, (t.task_id, crop.action.boxes, want)
    cli("filter", "-w", ws, "--run", "six")
    verdicts = [v for f in run.verdict_files() for v in read_records(f, Verdict) if v.filter == "checker_agreed"]
    assert len(verdicts) == 6 and all(v.passed and v.reason.startswith("checker: CONFIRMED") for v in verdicts)
    assert all(run.verdicts().keep(t) for t in episodes)
    out = tmp_path / "export"
    cli("export", "-w", ws, "--run", "six", "--out", out, "--format", "hf", "--format", "verl")
    rows = [r for f in sorted((out / "verl").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert rows and all(r["extra_info"]["reward"] == "checked_answer" and r["data_source"] == "checked_source" for r in rows)
    for r in rows:
        gold = r["reward_model"]["ground_truth"]
        # hand values: right and brief 0.75 + 0.25; wrong and long 0 + 0; wrong but brief 0.25
        right = compute_score(r["data_source"], f"<answer>{gold}</answer>", gold, r["extra_info"], judge="rules")
        long_wrong = compute_score(r["data_source"], "<answer>about nine hundred million</answer>", gold, r["extra_info"], judge="rules")
        brief_wrong = compute_score(r["data_source"], "<answer>1</answer>", gold, r["extra_info"], judge="rules")
        assert (right["score"], long_wrong["score"], brief_wrong["score"]) == (1.0, 0.0, 0.25), (r["id"], right, long_wrong)


def test_the_config_knows_a_role_because_a_registered_recipe_declares_it(extended):
    cfg = parse_config({"roles": {"checker": {"same_as": "policy"}, "policy": {"kind": "oracle"}}})
    assert cfg.roles["checker"].same_as == "policy"
    unregister(extended.name)
    try:
        with pytest.raises(ConfigError, match=r"unknown role\(s\) \['checker'\]"):
            parse_config({"roles": {"checker": {"kind": "oracle"}}})
    finally:
        register(extended)


def test_a_kind_the_recipes_role_does_not_allow_is_one_line(extended, tmp_path):
    from vrag_data.config import RoleConfig
    from vrag_data.teacher.roles import role_problems

    problems = role_problems([extended], {"policy": RoleConfig(kind="oracle"), "judge": RoleConfig(kind="rules"),
                                          "checker": RoleConfig(kind="rules")})
    assert len(problems) == 1 and problems[0].startswith("roles.checker: recipe checked_crop uses it") and "kind rules" in problems[0]
