"""Augmentations: VISOR query rewrite + verification round, EVisRAG top-1..5 context variants."""

from __future__ import annotations

import pytest

from tests.support.rewards_factory import make_task, make_traj
from vrag_data.augment import AugmentError, add_verification, context_variants, replace_queries, visor_augment
from vrag_data.env.actions import parse_action
from vrag_data.rewards import score_trajectory
from vrag_data.schema.records import Action, Message, Trajectory, Turn

TASK = make_task(question="What was revenue in 2019?", answer="42", pages=["doc_3"])
DOC_PAGES = [f"doc_{i}" for i in range(1, 9)] + ["other_1"]


def visor_traj():
    return make_traj(TASK, [("search", "company sales", ["doc_1"]), ("search", "2019 revenue table", ["doc_3"]),
                            ("crop", "doc_3", (100, 100, 400, 300)), ("answer", "42")], recipe="visor")


def test_replace_queries():
    t = visor_traj()
    out = replace_queries(t, TASK)
    searches = [turn for turn in out.turns if turn.action.kind == "search"]
    assert [s.action.query for s in searches] == [TASK.question] * 2
    assert all(f"<search>{TASK.question}</search>" in s.assistant for s in searches)
    assert all(parse_action(s.assistant, "visor").query == TASK.question for s in searches)
    assert all("look for it" in s.assistant for s in searches)  # the teacher's thought is kept
    assert "company sales" not in " ".join(turn.assistant for turn in out.turns)
    assert out.traj_id != t.traj_id and out.extra["augmentation"] == "visor_query_rewrite"
    assert out.extra["source_traj_id"] == t.traj_id
    assert t.turns[0].action.query == "company sales"  # input untouched
    with pytest.raises(AugmentError, match="no search"):
        replace_queries(make_traj(TASK, [("answer", "42")]), TASK)


def test_verification_round():
    t = visor_traj()
    out = add_verification(t, TASK, DOC_PAGES)
    page = out.extra["verification_page"]
    # an unseen page of the same document, never another document's
    assert page.startswith("doc_") and page not in t.retrieved_pages
    assert len(out.turns) == len(t.turns) + 1
    search, answer = out.turns[-2], out.turns[-1]
    assert search.action.kind == "search" and search.observation.images[0].page_id == page
    assert "<answer>" not in search.assistant and f"<search>{TASK.question}</search>" in search.assistant
    assert answer.action.kind == "answer" and answer.assistant.endswith("<answer>42</answer>")
    assert out.final_answer == "42" and out.retrieved_pages[-1] == page
    assert [turn.idx for turn in out.turns] == list(range(len(out.turns)))
    # reproducible per trajectory; teacher text is used when given
    assert add_verification(t, TASK, DOC_PAGES).extra["verification_page"] == page
    told = add_verification(t, TASK, DOC_PAGES, verification=lambda tr, task, p: f"Page {p} agrees.")
    assert f"Page {page} agrees." in told.turns[-1].action.thought
    # the new turns are canonical messages of the recipe's grammar
    for turn in told.turns[-2:]:
        assert parse_action(turn.assistant, "visor") == turn.action
    with pytest.raises(AugmentError, match="no unseen page"):
        add_verification(t, TASK, ["doc_1", "doc_3", "other_2"])


def test_visor_augment_earns_the_verification_reward():
    """Before: stops right after full retrieval (delta 0 -> -0.5). After: one verification search (0.0)."""
    t = visor_traj()
    before = score_trajectory(t, TASK)
    after = score_trajectory(visor_augment(t, TASK, DOC_PAGES), TASK)
    assert before.components["retrieval"] == -0.5 and after.components["retrieval"] == 0.0
    assert after.total == pytest.approx(1.0)


def evis_traj(shown, ev_lines, answer="42"):
    text = ("<observe>pages</observe>\n<evidence>\n" + "\n".join(ev_lines) + "\n</evidence>\n"
            f"<think>The table gives 42.</think>\n<answer>{answer}</answer>")
    base = make_traj(TASK, [("answer", answer)], recipe="evisrag")
    turn = Turn(idx=0, assistant=text, action=Action(kind="answer", evidence=ev_lines, answer=answer))
    return base.model_copy(update={
        "turns": [turn], "retrieved_pages": shown, "extra": {"shown_pages": shown},
        "prompt": [Message(role="system", text="s"), Message(role="user", text="q")],
    })


def test_evisrag_context_variants():
    ranked = ["doc_9", "doc_3", "doc_1", "doc_2", "doc_4"]
    ev = ["[1]: no relevant information", "[2]: revenue was 42", "[3]: no relevant information",
          "[4]: no relevant information", "[5]: no relevant information"]
    t = evis_traj(ranked, ev)
    res = context_variants(t, TASK)
    assert [v.extra["top_k"] for v in res.variants] == [1, 2, 3, 4, 5] and not res.skipped
    top1, top2 = res.variants[0], res.variants[1]
    # top-1 shows only doc_9: the gold page is missing -> insufficient
    assert top1.extra["sufficient"] is False and top1.final_answer == "insufficient to answer"
    assert top1.turns[0].action.evidence == ["no relevant information"]
    assert [im.page_id for im in top1.prompt[-1].images] == ["doc_9"]
    assert top2.extra["sufficient"] is True and top2.final_answer == "42"
    assert top2.turns[0].action.evidence == ["no relevant information", "revenue was 42"]
    assert parse_action(top2.turns[0].assistant, "evisrag") == top2.turns[0].action
    assert len({v.traj_id for v in res.variants}) == 5
    # every variant is a perfect EVisRAG episode for its own label
    for v in res.variants:
        r = score_trajectory(v, TASK)
        assert r.components["format"] == 1.0 and r.components["derivation"] == 1.0, v.extra


def test_evisrag_variant_skipped_when_gold_evidence_unknown():
    # the teacher saw only doc_9; a ranking that brings the gold page in cannot be labelled honestly
    t = evis_traj(["doc_9"], ["[1]: no relevant information"], answer="insufficient to answer")
    res = context_variants(t, TASK, ranked_pages=["doc_9", "doc_3"], ks=[1, 2, 3])
    assert [v.extra["top_k"] for v in res.variants] == [1]
    assert any("doc_3" in s for s in res.skipped) and any("only 2 ranked" in s for s in res.skipped)


def test_augmented_records_validate():
    t = visor_traj()
    for out in (visor_augment(t, TASK, DOC_PAGES), replace_queries(t, TASK)):
        assert Trajectory.model_validate(out.model_dump()) == out
