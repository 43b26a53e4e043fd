"""Pure pieces of the export: chat-turn building, placeholders, coordinates, RL fields, shard writer, images."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import answer_turn, build_workspace, search_turn, task, traj, user  # noqa: E402

from vrag_data.export.conversation import AlternationError, trajectory_to_conversation, with_placeholders  # noqa: E402
from vrag_data.env.geometry import family_to_raw, raw_to_family  # noqa: E402
from vrag_data.export.images import BadImage, ImageStore, MissingImage  # noqa: E402
from vrag_data.export.io import ShardWriter  # noqa: E402
from vrag_data.export.rl import data_source_for, evidence_ground_truth, vrag_file_fields  # noqa: E402
from vrag_data.schema.geometry_types import Box  # noqa: E402
from vrag_data.schema.records import Action, ImageRef, Message, Observation, Turn  # noqa: E402


@given(st.text(max_size=200), st.integers(min_value=0, max_value=5), st.booleans())
def test_placeholder_count_always_matches(text, n, author):
    assert with_placeholders(text, n, author).count("<image>") == n


def test_author_placed_placeholders_are_kept():
    assert with_placeholders("[1] <image> [2] <image> q?", 2, author_placed=True) == "[1] <image> [2] <image> q?"
    assert with_placeholders("a <image> b", 2, author_placed=True) == "<image><image>\na [image] b"


def test_conversation_alternates_and_drops_trailing_observation():
    t = task("t1", "docA", 1, "x")
    tr = traj("a", t, [search_turn(0, "docA_1"), search_turn(1, "docA_2")])  # ends with an unanswered observation
    conv = trajectory_to_conversation(tr)
    assert [m.role for m in conv.turns] == ["user", "assistant", "user", "assistant"]
    assert [r.page_id for r in conv.images] == ["docA_1"]  # the dropped observation's image goes too
    assert conv.system.startswith("You answer")


def test_conversation_merges_consecutive_user_turns():
    t = task("t1", "docA", 1, "x")
    prompt = user(t.question) + [Message(role="user", text="extra hint", images=[ImageRef(page_id="docA_3")])]
    conv = trajectory_to_conversation(traj("b", t, [answer_turn(0, "x")], prompt=prompt))
    assert [m.role for m in conv.turns] == ["user", "assistant"]
    assert conv.turns[0].content.count("<image>") == 1 and "extra hint" in conv.turns[0].content


def test_unrepairable_alternation_raises():
    t = task("t1", "docA", 1, "x")
    with pytest.raises(AlternationError, match="no assistant turn"):
        trajectory_to_conversation(traj("c", t, []))
    with pytest.raises(AlternationError, match="starts with an assistant"):
        trajectory_to_conversation(traj("d", t, [answer_turn(0, "x")], prompt=[Message(role="system", text="s")]))


def test_box_without_recorded_space_uses_the_crop_record():
    t = task("t1", "docA", 1, "x")
    box = Box.from_raw((100, 280, 500, 840), 1000, 1400)
    crop = Turn(idx=0, assistant="<bbox>[100, 280, 500, 840]</bbox>", action=Action(kind="crop", boxes=[[100, 280, 500, 840]], page_ids=["docA_1"]),
                observation=Observation(kind="crop", images=[ImageRef(page_id="docA_1", box=box)]))
    from vrag_data.schema.records import CropRecord

    tr = traj("e", t, [crop, answer_turn(1, "x")], crops=[CropRecord(turn=0, page_id="docA_1", box=box)])
    conv = trajectory_to_conversation(tr, "qwen3-vl", page_size=lambda pid: (1000, 1400))
    assert "[100, 200, 500, 600]" in conv.turns[1].content and conv.boxes_converted == 1
    conv = trajectory_to_conversation(tr, "qwen3-vl", page_size=lambda pid: (_ for _ in ()).throw(KeyError(pid)))
    assert conv.boxes_unconverted == 1 and "[100, 280, 500, 840]" in conv.turns[1].content


@given(st.integers(200, 4000), st.integers(200, 4000), st.floats(0, 0.45), st.floats(0, 0.45))
def test_coordinate_round_trip_within_a_pixel_of_the_resized_grid(w, h, fx, fy):
    raw = (fx * w, fy * h, (fx + 0.5) * w, (fy + 0.5) * h)
    for fam, space in (("qwen2.5-vl", "qwen2.5-vl"), ("qwen3-vl", "qwen3-vl")):
        back = family_to_raw(raw_to_family(raw, w, h, fam, 401408), w, h, space, 401408)
        tol = max(w, h) / 1000 + max(w, h) / 300  # one unit of the coarser grid
        assert all(abs(a - b) <= tol for a, b in zip(back, raw, strict=True))


def test_rl_fields():
    assert data_source_for("SlideVQA") == "slidevqa_test" and data_source_for("MMLongBench") == "mmlongdoc"
    assert data_source_for("financebench") == "rag" and data_source_for("financebench", {"financebench": "vidoseek"}) == "vidoseek"
    t = task("t1", "my_doc", 4, "x")
    assert vrag_file_fields(t) == ("my_doc.pdf", [4])
    gt = evidence_ground_truth(t, ["my_doc_1", "my_doc_4"], ["[2]: the value x"])
    assert gt.splitlines() == ["<evidence>", "[1]: no relevant information", "[2]: the value x", "</evidence>", "<answer>x</answer>"]


def test_shard_writer_is_atomic_and_bounded(tmp_path):
    schema = pa.schema([("a", pa.int64())])
    w = ShardWriter(tmp_path, tmp_path / "d", "train", "parquet", 2, schema)
    for i in range(5):
        w.add({"a": i})
    assert len(w.paths) == 2 and len(w.buffer) == 1
    w.close()
    assert [p.name for p in w.paths] == ["train-00000.parquet", "train-00001.parquet", "train-00002.parquet"] and w.rows == 5
    assert not list((tmp_path / ".tmp").iterdir())
    failing = ShardWriter(tmp_path, tmp_path / "e", "x", "json", 10, prepare=lambda rows: [{"bad": object()}])
    failing.add({"a": 1})
    with pytest.raises(TypeError):
        failing.close()
    assert not (tmp_path / "e").exists() or not list((tmp_path / "e").iterdir())  # nothing half-written counts
    assert not list((tmp_path / ".tmp").iterdir())


def test_image_store_once_per_image_and_errors(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    store = ImageStore(ws, tmp_path / "o", "qwen2.5-vl")
    a = store.materialise(ImageRef(page_id="docA_1"), 401408)
    assert store.materialise(ImageRef(page_id="docA_1"), 401408) == a and store.written == 1
    assert store.materialise(ImageRef(page_id="docA_1"), 200704) != a  # another size, another file
    with pytest.raises(MissingImage, match="docA_9"):
        store.materialise(ImageRef(page_id="docA_9"), 401408)
    with pytest.raises(BadImage):
        store.materialise(ImageRef(page_id="docA_1", box=Box(raw=(5000, 5000, 6000, 6000), norm=(1000, 1000, 1000, 1000))), 401408)
    (tmp_path / "ws" / "pages" / "docB_2.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(BadImage):
        store.materialise(ImageRef(page_id="docB_2"), 401408)
    assert json.dumps(a).startswith('"images/')


def test_prompt_coordinate_words_follow_the_exported_family():
    from vrag_data.export.sft_records import reword_coords
    from vrag_data.recipe import get_recipe
    from vrag_data.recipe.spec import COORD_WORDS

    unidoc = get_recipe("unidoc_rl")  # synthesised in 0-1000 (Qwen3-VL's convention)
    system = unidoc.system_text
    assert "coordinates from 0 to 1000" in system
    as_pixels = reword_coords(system, COORD_WORDS, unidoc.coord_space, "qwen2.5-vl")
    assert "pixel coordinates of that image" in as_pixels and "0 to 1000" not in as_pixels
    assert reword_coords(system, COORD_WORDS, unidoc.coord_space, "qwen3-vl") == system
    # the RL trainer rolls the recipe out in its model family's convention, prompt included
    rl = unidoc.for_rl(4, 200704, "qwen2.5-vl")
    assert rl.coord_space == "qwen2.5-vl" and rl.system_text == as_pixels
    vrag = get_recipe("vrag_rl")
    assert "0 to 1000" in reword_coords(vrag.system_text, COORD_WORDS, "qwen2.5-vl", "qwen3-vl")
