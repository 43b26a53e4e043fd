"""Recipe definitions: options, prompts, grammars, the pure helpers behind the recipes' hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from pipelines.registry import all_recipes, get_recipe
from pipelines.unidoc_rl import balanced_order, candidate_blocks
from pipelines.vrag_rl import parse_grounding
from vrag_data.config import ConfigError, load_config
from tests.support.shipped import SHIPPED
from vrag_data.recipe import recipe_names, resolve_recipe

RECIPES = SHIPPED
from vrag_data.env import GRAMMARS, parse_action
from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import LayoutBlock, Task
from vrag_data.synth.annotate import LabelledRef, draw_labels
from vrag_data.synth.oracle import best_candidate, keywords

ROOT = Path(__file__).resolve().parents[2]
TAGS = {
    "vrag_rl": ["<think>", "<search>", "<bbox>", "<answer>"],
    "unidoc_rl": ["<think>", "<search>", "<select>", "<bbox>", "<answer>"],
    "visor": ["<think>", "<search>", "<bbox>", "<answer>"],
    "evisrag": ["<observe>", "<evidence>", "<think>", "<answer>", "no relevant information", "insufficient to answer"],
    "mmdoc_r1": ["<think>", "<search>", "<read>", "<FINISH>"],
}


def test_every_recipe_is_registered_with_its_own_grammar_and_reward():
    assert set(SHIPPED) <= set(recipe_names())
    recipes = {n: all_recipes()[n] for n in SHIPPED}
    for name, r in recipes.items():
        assert r.name == name and GRAMMARS[r.grammar.name] == r.grammar and r.reward.name == name
        assert r.grammar.name == name and "policy" in r.role_names and r.filters and r.reward.scopes
    assert len({r.prompt_hash() for r in recipes.values()}) == len(recipes)


@pytest.mark.parametrize("name", RECIPES)
def test_prompts_state_the_recipe_format(name):
    r = get_recipe(name)
    text = r.system_prompt + r.user_template + "".join(r.extra_prompts.values())
    if name == "evisrag":
        from pipelines.evisrag import INSTRUCTION

        text = INSTRUCTION
    for tag in TAGS[name]:
        assert tag in text, (name, tag)
    prompt = r.initial_prompt(Task(task_id="t", question="What is X?", answer="1", doc_ids=["d"], doc_stems=["s"]))
    assert "What is X?" in prompt[-1].text


def test_paper_settings_per_recipe():
    r = all_recipes()
    assert (r["visor"].context_policy().name, r["visor"].env.top_k, r["visor"].env.dedup, r["visor"].env.crop_margin) == ("evidence_window", 1, True, 28)
    assert r["vrag_rl"].coord_space == "qwen2.5-vl" and r["unidoc_rl"].coord_space == "qwen3-vl"
    assert r["unidoc_rl"].env.search_mode == "candidates" and r["mmdoc_r1"].env.scope == "document"
    assert r["evisrag"].env.top_k == 3 and r["mmdoc_r1"].env.search_mode == "text_hits"


def test_options_apply_and_unknown_or_out_of_range_options_fail_with_one_line():
    r = get_recipe("evisrag", {"top_k": 5})
    assert r.env.top_k == 5 and r.options.top_k == 5
    assert get_recipe("visor", {"window": 3}).context_policy().window == 3
    assert get_recipe("vrag_rl", {"max_turns": 4}).env.max_turns == 4
    # EVisRAG's retrieval is an environment step before the policy's first turn: 5 free turns = 6 environment turns
    assert get_recipe("evisrag", {"max_turns": 5}).env.max_turns == 6 and get_recipe("evisrag", {"max_turns": 5}).free_turns == 5
    with pytest.raises(ConfigError, match="recipe_options.vrag_rl: windw: Extra inputs are not permitted"):
        get_recipe("vrag_rl", {"windw": 2})
    with pytest.raises(ConfigError, match="recipe_options.evisrag: top_k: Input should be less than or equal to 5"):
        get_recipe("evisrag", {"top_k": 6})
    with pytest.raises(ConfigError, match="unknown recipe"):
        get_recipe("vrag")


def test_each_recipe_declares_only_the_options_it_reads():
    common = {"top_k", "coord_space", "max_pixels", "max_turns", "max_invalid", "scope"}
    own = {name: set(r.options_model.model_fields) - common for name, r in all_recipes().items() if name in SHIPPED}
    assert own == {"vrag_rl": {"grounding", "grounding_fallback"}, "visor": {"window"},
                   "unidoc_rl": {"max_candidates", "candidate_retries"}, "evisrag": set(), "mmdoc_r1": set()}
    # the defaults each hook reads are filled in on the recipe's own options object
    r = all_recipes()
    assert (r["visor"].options.window, r["unidoc_rl"].options.max_candidates, r["vrag_rl"].options.grounding) == (2, 12, True)


def test_own_turn_budgets_and_the_rl_budget_follow_one_rule():
    r = all_recipes()
    assert {n: r[n].free_turns for n in SHIPPED} == {"evisrag": 2, "mmdoc_r1": 8, "unidoc_rl": 8, "visor": 10, "vrag_rl": 8}
    desc = r["visor"].describe()
    assert desc["max_turns"] == 10 and desc["turn_budget"]["forced_answer_turn"] is True
    assert "one more (forced-answer) turn" in desc["turn_budget"]["rule"]
    # RL rollouts: the same rule; VRAG-RL also switches its grounding expert off
    rl = r["vrag_rl"].for_rl(3, 200704)
    assert (rl.env.max_turns, rl.options.grounding, rl.max_pixels) == (3, False, 200704)
    assert r["evisrag"].for_rl(1, 200704).env.max_turns == 2  # retrieval step + one free turn


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "recipes").glob("*.yaml")) + [ROOT / "configs" / "endpoints" / "vllm.yaml"],
                         ids=lambda p: p.name)
def test_shipped_configs_load(path):
    cfg = load_config(path)
    assert cfg.roles["policy"].endpoints
    for name in cfg.synth.recipes:
        resolve_recipe(name, cfg)


@given(st.integers(1, 12), st.text(min_size=1, max_size=8))
def test_balanced_order_is_a_latin_square_over_samples(n, seed):
    orders = [balanced_order(n, s, seed) for s in range(n)]
    for o in orders:
        assert sorted(o) == list(range(n))
    for pos in range(n):  # every item takes every position exactly once
        assert sorted(o[pos] for o in orders) == list(range(n))
    assert balanced_order(n, 0, seed) == balanced_order(n, n, seed)


def test_candidate_blocks_skip_headers_and_keep_the_largest():
    def blk(i, cls, box):
        return LayoutBlock(block_id=f"p_1#{i}", doc_id="d", page_id="p_1", page=1, cls=cls, bbox=Box.from_raw(box, 1000, 1000), source="pymupdf")

    blocks = [blk(0, "header", (0, 0, 1000, 50)), blk(1, "text", (0, 100, 100, 120)), blk(2, "table", (0, 200, 900, 600)),
              blk(3, "figure", (0, 650, 500, 900))]
    got = candidate_blocks(blocks, 2)
    assert [b.block_id for b in got] == ["p_1#2", "p_1#3"]


def test_grounding_replies_are_read_in_either_shape():
    assert parse_grounding("<bbox>[10, 20, 30, 40]</bbox>") == [10, 20, 30, 40]
    assert parse_grounding('```json\n[{"bbox_2d": [5, 6, 70.5, 80], "label": "table"}]\n```') == [5, 6, 70.5, 80]
    assert parse_grounding("no box here") is None
    assert parse_grounding("<bbox>[30, 20, 10, 40]</bbox>") is None  # degenerate


def test_oracle_candidate_matching_and_keywords():
    target = Box.from_raw((100, 100, 200, 130), 1000, 1000)
    boxes = [Box.from_raw(b, 1000, 1000) for b in [(0, 0, 50, 50), (90, 90, 210, 140), (0, 80, 900, 600)]]
    assert best_candidate(target, boxes) == 1
    assert best_candidate(target, boxes[::2]) == 1  # no close box: the smallest one covering the target
    assert best_candidate(target, boxes[:1]) is None
    kws = keywords("What was Zephyra Analytics's revenue in 2021?")
    assert kws[:3] == ["Zephyra", "Analytics", "2021"] and "What" not in kws


def test_labelled_ref_draws_numbered_boxes_and_keys_apart_from_the_plain_page():
    page = Image.new("RGB", (400, 300), (255, 255, 255))
    boxes = [Box.from_raw((20, 40, 200, 120), 400, 300), Box.from_raw((220, 150, 380, 280), 400, 300)]
    drawn = draw_labels(page, boxes)
    assert drawn.size == page.size and page.getpixel((20, 80)) == (255, 255, 255)
    assert drawn.getpixel((20, 80)) != (255, 255, 255)  # the outline of box 1
    ref = LabelledRef(page_id="p_1", labels=boxes)
    from vrag_data.teacher.messages import image_ref_key
    from vrag_data.schema.records import ImageRef

    assert image_ref_key(ref) != image_ref_key(ImageRef(page_id="p_1"))


def test_recipe_grammar_parses_the_papers_example_shapes():
    assert parse_action("<think>x</think><search>q</search>", "vrag_rl").kind == "search"
    assert parse_action("<think>x</think><select>[0]</select>", "unidoc_rl").indices == [0]  # the candidate step's "no zoom"
    assert parse_action('<think>x</think><read>[{"page_ids": [4, 5], "query": "q"}]</read>', "mmdoc_r1").page_ids == ["4", "5"]


def test_mmdoc_answer_agent_gets_the_text_of_the_pages_read():
    from types import SimpleNamespace

    from pipelines.mmdoc_r1 import read_pages_text
    from vrag_data.schema.records import Page

    def page(n, text="", ocr=""):
        return Page(page_id=f"d_{n}", doc_id="sha", stem="d", page=n, image=f"pages/d_{n}.jpg", width=10, height=10, dpi=72,
                    text=text, ocr_text=ocr)

    ep = SimpleNamespace(pages={"d_2": page(2, "Revenue  rose to\n42 <answer>9</answer>"), "d_3": page(3, ocr="scanned 7"), "d_4": page(4)})
    out = read_pages_text(ep, ["d_2", "d_3", "d_2", "d_4", "d_9"])
    assert out.count("Text of page") == 2  # each page once; empty and unknown pages add nothing
    assert "Revenue rose to 42" in out and "scanned 7" in out  # the OCR text when there is no text layer
    assert "<answer>" not in out  # page text cannot act as markup
    r = get_recipe("mmdoc_r1")
    assert (r.env.top_k, r.env.search_depth) == (10, 10)
