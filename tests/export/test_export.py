"""Exports read back by their consumers: `datasets` (load_dataset by config, load_dataset("parquet")) for real.

LLaMA-Factory 0.9.5 and verl 0.9.1 download offline but pin against us (datasets<=4.0 / transformers<=5.6,
transformers<5.11), and qwen-vl-utils needs torchvision (absent here), so their readers cannot be imported:
`lf_sharegpt_check` and `verl_build_messages` below re-implement their documented checks (sharegpt converter:
system split off, user/observation on odd turns, assistant/function on even turns, even count; mm plugin:
`<image>` tokens == images; verl RLHFDataset: split each content on `<image>`, one image per placeholder).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import datasets
import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.cli.main import app  # noqa: E402
from vrag_data.export import export_run, kept_trajectories  # noqa: E402
from vrag_data.env.geometry import raw_to_family, smart_resize  # noqa: E402



@pytest.fixture(autouse=True)
def _rule_judge(monkeypatch):
    """These tests check the rule-judged rewards; the rule scorers are asked for explicitly, as a user would."""
    monkeypatch.setenv("VRAG_REWARD_JUDGE", "rules")

def lf_sharegpt_check(example: dict, attr: dict) -> tuple[str, list[dict]]:
    tags, cols = attr["tags"], attr["columns"]
    msgs = example[cols["messages"]]
    system = example.get(cols.get("system", ""), "")
    odd, even = (tags["user_tag"], "observation"), (tags["assistant_tag"], "function_call")
    for i, m in enumerate(msgs):
        assert m[tags["role_tag"]] in (odd, even)[i % 2], f"invalid role tag at turn {i}: {msgs}"
    assert len(msgs) % 2 == 0, "invalid message count"
    n_tokens = sum(m[tags["content_tag"]].count("<image>") for m in msgs)
    assert n_tokens == len(example[cols["images"]]), "image tokens != images"
    return system, msgs


def verl_build_messages(row: dict) -> list[list]:
    out = []
    for m in row["prompt"]:
        out.append([{"type": "image"} if seg == "<image>" else {"type": "text", "text": seg} for seg in re.split("(<image>|<video>)", m["content"])])
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    ws = build_workspace(root / "ws")
    summary = export_run(ws, "r1", out_dir=root / "out", shard_size=2, recipes=run_recipes())
    return ws, root / "out", summary


def test_summary_counts_and_skips(exported):
    _, out, s = exported
    assert (s.n_trajectories, s.n_kept) == (7, 5)
    assert s.counts["hf"] == {"sft": 3, "rl": 4}
    assert s.counts["llamafactory"] == {"vrag_rl": 2, "evisrag": 1}
    assert s.counts["verl"] == {"train": 3, "val": 1}  # one of the 4 tasks held out for validation (val_share 0.1)
    assert s.skipped == {"sft:missing_image": 1, "sft:alternation": 1, "rl:task_not_found": 1, "easyr1:missing_image": 1}
    rows = [json.loads(x) for x in (out / "skipped.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == {"tr4", "tr5", "t_missing:vrag_rl", "t4:vrag_rl"}
    assert any("docA_9.jpg" in r["reason"] for r in rows)
    assert not list((out / ".tmp").glob("*")), "temporary files left behind"
    card = (out / "hf" / "README.md").read_text()
    assert "sft:missing_image | 1" in card and "oracle" in card.lower() and "cfg123" in card and "`r1`" in card
    assert json.loads((out / "summary.json").read_text())["n_kept"] == 5


def test_hf_load_dataset_by_config_and_parquet(exported, monkeypatch):
    _, out, _ = exported
    monkeypatch.chdir(out)  # loaded from the export folder, as a trainer started there would
    dd = {name: datasets.load_dataset("hf", name, split="train") for name in ("sft", "rl")}
    assert set(dd) == {"sft", "rl"} and len(dd["sft"]) == 3 and len(dd["rl"]) == 3  # one task held out: `val`
    assert len(datasets.load_dataset("hf", "rl", split="val")) == 1
    assert isinstance(dd["sft"].features["images"].feature, datasets.Image)
    row = next(r for r in dd["sft"] if r["traj_id"] == "tr1")
    assert [im.size for im in row["images"]][0] == (532, 728)  # smart_resize(1400, 1000, 28, max 401408)
    n_tok = sum(m["content"].count("<image>") for m in row["messages"])
    assert n_tok == len(row["images"]) == 2
    sft_files = sorted(str(p) for p in (out / "hf" / "data").glob("sft-*.parquet"))
    assert len(sft_files) == 2  # shard_size=2, 3 records
    ds = datasets.load_dataset("parquet", data_files=sft_files, split="train")  # read as plain parquet: the names
    assert len(ds) == 3 and all(n.startswith("images/") for r in ds for n in r["images_file_names"])
    rl = datasets.load_dataset("parquet", data_files=sorted(str(p) for p in (out / "hf" / "data").glob("rl-*.parquet")), split="train")
    r = next(x for x in rl if x["extra_info"]["task_id"] == "t1")
    assert r["reward_model"] == {"style": "rule", "ground_truth": "42"}
    assert json.loads(r["extra_info"]["gold_boxes"]) == {"docA_2": [[100, 200, 500, 600]]}


def test_hf_loads_from_another_folder_and_as_a_plain_copy(exported, tmp_path, monkeypatch):
    """The `datasets` convention: the dataset carries its images. A plain `cp -r hf/` elsewhere, loaded from a third
    working directory, opens every image; hf/ holds each distinct image's bytes about once (not once per row)."""
    import shutil

    _, out, _ = exported
    copy = tmp_path / "elsewhere" / "hf"
    shutil.copytree(out / "hf", copy)
    monkeypatch.chdir(tmp_path)
    for name in ("sft", "rl"):
        ds = datasets.load_dataset(str(copy), name, split="train")
        sizes = [im.size for row in ds for im in row["images"]]
        assert sizes and all(w > 0 and h > 0 for w, h in sizes)
    distinct = sum(p.stat().st_size for p in (out / "hf" / "data" / "images").iterdir() if p.suffix == ".jpg")
    held = sum(p.stat().st_size for p in (out / "hf").rglob("*") if p.is_file() and p.name != "README.md")
    assert held <= 1.3 * distinct + 20_000  # each image once (hf/data/images), plus the rows' own bytes


def test_llamafactory_sharegpt_rules(exported):
    _, out, _ = exported
    lf = out / "llamafactory"
    info = json.loads((lf / "dataset_info.json").read_text())
    assert set(info) == {"vragdata_vrag_rl", "vragdata_evisrag"}
    n = 0
    for name, attr in info.items():
        assert attr["formatting"] == "sharegpt"
        folder = lf / attr["file_name"]
        for shard in sorted(folder.iterdir()):
            assert shard.suffix == ".json"  # LLaMA-Factory requires one file type per folder
            for ex in json.loads(shard.read_text()):
                system, msgs = lf_sharegpt_check(ex, attr)
                assert system.startswith("You answer questions") if name.endswith("vrag_rl") else system == ""
                assert msgs[-1]["role"] == "assistant"
                for p in ex["images"]:
                    assert (out / p).is_file()  # media_dir = export root
                n += 1
    assert n == 3
    tr2 = next(ex for ex in json.loads((lf / "vrag_rl" / "part-00000.json").read_text()) if ex["id"] == "tr2")
    # the page text's literal <image> is escaped; the two consecutive assistant turns are merged
    assert "[image] logo here" in tr2["messages"][2]["content"]
    assert [m["role"] for m in tr2["messages"]] == ["user", "assistant", "user", "assistant"]
    assert "still thinking" in tr2["messages"][3]["content"] and "<answer>blue</answer>" in tr2["messages"][3]["content"]
    cfg = yaml.safe_load((lf / "sft_vrag_rl_qwen2_5vl.yaml").read_text())
    assert cfg["image_max_pixels"] == 401408 and cfg["mask_history"] is False and cfg["dataset"] == "vragdata_vrag_rl"
    assert cfg["learning_rate"] == 1.0e-5 and cfg["template"] == "qwen2_vl"
    assert yaml.safe_load((lf / "sft_evisrag_qwen2_5vl.yaml").read_text())["image_max_pixels"] == 3920000


def test_crop_box_converted_to_qwen25_pixels(exported):
    _, out, _ = exported
    ex = next(e for e in json.loads((out / "llamafactory" / "vrag_rl" / "part-00000.json").read_text()) if e["id"] == "tr1")
    crop_turn = ex["messages"][3]["content"]
    # 0-1000 [100,200,500,600] on a 1000x1400 page -> raw [100,280,500,840] -> 532x728 image pixels
    assert "<bbox>[53, 146, 266, 437]</bbox>" in crop_turn
    assert raw_to_family((100, 280, 500, 840), 1000, 1400, "qwen3-vl", 401408) == [100, 200, 500, 600]


def test_verl_parquet_as_rlhf_dataset_reads_it(exported):
    _, out, _ = exported
    files = sorted(str(p) for p in (out / "verl").glob("*-*.parquet"))  # train and the held-out val split
    ds = datasets.load_dataset("parquet", data_files=files, split="train")
    assert {"data_source", "prompt", "images", "ability", "reward_model", "extra_info", "file_name", "reference_page"} <= set(ds.column_names)
    rows = {r["extra_info"]["task_id"] + "/" + r["extra_info"]["recipe"]: r for r in ds}
    t1 = rows["t1/vrag_rl"]
    assert t1["data_source"] == "slidevqa_test" and rows["t2/vrag_rl"]["data_source"] == "rag"
    assert t1["file_name"] == "docA.pdf" and t1["reference_page"] == [2]
    assert t1["extra_info"]["gold_pages"] == ["docA_2"] and t1["images"] == []
    ev = rows["t2/evisrag"]
    assert ev["extra_info"]["shown_pages"] == ["docB_1", "docB_2", "docA_1"]
    n_placeholders = sum(seg == {"type": "image"} for msg in verl_build_messages(ev) for seg in msg)
    assert n_placeholders == len(ev["images"]) == 3
    for im in ev["images"]:
        assert set(im) == {"image"}  # verl's process_image must not see a `bytes` key next to `image`
        assert not Path(im["image"]).is_absolute()  # relative to the export folder: movable
        Image.open(out / im["image"]).verify()
    assert sorted({r["extra_info"]["index"] for r in ds}) == [0, 1, 2, 3]


def test_easyr1_jsonl(exported):
    _, out, _ = exported
    rows = [json.loads(x) for f in sorted((out / "easyr1").glob("*/*.jsonl")) for x in f.read_text().splitlines()]
    ev = next(r for r in rows if r["recipe"] == "evisrag")
    assert ev["prompt"].count("<image>") == len(ev["image"]) == 3
    assert "[1]: the car is blue" in ev["answer"] and "[3]: no relevant information" in ev["answer"]
    assert ev["answer"].startswith("<evidence>") and ev["answer"].endswith("<answer>blue</answer>")
    assert ev["shown_pages"] == ["docB_1", "docB_2", "docA_1"] and ev["gold_pages"] == ["docB_1"]
    v = next(r for r in rows if r["task_id"] == "t1")  # no prompt images: gold page stands in
    assert v["prompt"].count("<image>") == len(v["image"]) == 1
    # not the evidence form: the ground truth names the recipe's own reward and what it reads (EasyR1 passes only it)
    gt = json.loads(v["answer"])
    assert gt["ground_truth"] == "42" and gt["extra_info"]["reward"] == "vrag_rl" and gt["extra_info"]["gold_pages"] == ["docA_2"]
    assert all((out / p).is_file() for r in rows for p in r["image"])
    cfg = yaml.safe_load((out / "easyr1" / "data_config.yaml").read_text())["data"]
    # movable: paths relative to the export folder (EasyR1 runs from there), a validation set, a prompt budget
    # that keeps every row (EasyR1's default 512 would filter them all)
    assert cfg["image_key"] == "image" and cfg["image_dir"] == "." and cfg["train_files"] == "easyr1/train"
    assert cfg["val_files"] and (out / cfg["val_files"]).is_dir()
    from PIL import Image

    def tokens(r):  # text at 2 bytes per token + one token per 28x28 patch of each written image + 128 template
        sizes = [Image.open(out / p).size for p in r["image"]]
        return 128 + len(r["prompt"].encode()) // 2 + sum(-(-w // 28) * -(-h // 28) for w, h in sizes)

    assert max(tokens(r) for r in rows) <= cfg["max_prompt_length"] < max(tokens(r) for r in rows) + 1024
    assert cfg["max_prompt_length"] % 1024 == 0 and cfg["min_pixels"] is None


def test_no_verdicts_keeps_answered_with_warning(tmp_path):
    ws = build_workspace(tmp_path / "ws", with_verdicts=False)
    kept = kept_trajectories(ws.run("r1"))
    assert {t.traj_id for t in kept} == {"tr1", "tr2", "tr3", "tr4", "tr5", "tr6"}
    s = export_run(ws, "r1", formats=["llamafactory"], out_dir=tmp_path / "o", recipes=run_recipes())
    assert any("no verdicts" in w for w in s.warnings)


def test_cli_empty_run_stops_with_one_line(tmp_path):
    """Nothing kept: no format would get a record, so the export stops with one line and a non-zero exit and writes
    no folder (empty splits would leave configs that send a trainer looking for data elsewhere)."""
    ws = build_workspace(tmp_path / "ws")
    from vrag_data.schema.records import Verdict
    from vrag_data.store import write_records

    write_records(ws.path("runs", "r1", "verdicts", "v.parquet"),
                  [Verdict(run_id="r1", traj_id=f"tr{i}", task_id="t", filter="x", passed=False) for i in range(1, 8)], Verdict)
    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "r1", "--format", "hf", "--format", "verl", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if "nothing to export" in line]
    assert len(errors) == 1 and "0 of 7 trajectories kept" in errors[0]
    assert not (tmp_path / "o").exists()


def test_cli_errors_are_one_line(tmp_path):
    build_workspace(tmp_path / "ws")
    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "nope", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "run not found" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "r1", "--format", "csv", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "unknown export format" in res.output


@pytest.mark.slow
def test_reexport_is_idempotent_and_drops_stale_shards(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    export_run(ws, "r1", formats=["hf", "verl"], out_dir=tmp_path / "o", shard_size=1, recipes=run_recipes())
    assert len(list((tmp_path / "o" / "hf" / "data").glob("sft-*.parquet"))) == 3
    images = sorted(p.name for p in (tmp_path / "o" / "hf" / "data" / "images").iterdir())
    s = export_run(ws, "r1", formats=["hf", "verl"], out_dir=tmp_path / "o", shard_size=100, recipes=run_recipes())
    assert len(list((tmp_path / "o" / "hf" / "data").glob("sft-*.parquet"))) == 1
    assert sorted(p.name for p in (tmp_path / "o" / "hf" / "data" / "images").iterdir()) == images
    assert s.stats["images"]["written"] == 0 and s.counts["hf"]["sft"] == 3


def test_qwen3_family_keeps_norm_boxes(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    export_run(ws, "r1", formats=["llamafactory"], out_dir=tmp_path / "o", model_family="qwen3-vl", recipes=run_recipes())
    ex = next(e for e in json.loads((tmp_path / "o" / "llamafactory" / "vrag_rl" / "part-00000.json").read_text()) if e["id"] == "tr1")
    assert "<bbox>[100, 200, 500, 600]</bbox>" in ex["messages"][3]["content"]
    assert yaml.safe_load((tmp_path / "o" / "llamafactory" / "sft_vrag_rl_qwen3vl.yaml").read_text())["template"] == "qwen3_vl"


@pytest.mark.parametrize(
    ("h", "w", "max_pixels", "expected"),
    [(1400, 1000, 401408, (728, 532)), (28, 28, 401408, (56, 56)), (1000, 1000, 12845056, (1008, 1008)), (2000, 500, 200704, (896, 224))],
)
def test_smart_resize_hand_values(h, w, max_pixels, expected):
    assert smart_resize(h, w, 28, 56 * 56, max_pixels) == expected


def test_verl_row_is_scored_by_the_reward_entry_point(exported):
    rewards = pytest.importorskip("vrag_data.rewards.verl", reason="rewards module not present")
    _, out, _ = exported
    ds = datasets.load_dataset("parquet", data_files=sorted(str(p) for p in (out / "verl").glob("*-*.parquet")), split="train")
    row = next(r for r in ds if r["extra_info"]["task_id"] == "t1")
    good = rewards.compute_score(row["data_source"], "<think>x</think><search>total</search><answer>42</answer>",
                                 row["reward_model"]["ground_truth"], row["extra_info"])
    bad = rewards.compute_score(row["data_source"], "<think>x</think><search>total</search><answer>17</answer>",
                                row["reward_model"]["ground_truth"], row["extra_info"])
    assert good["score"] > bad["score"]


def test_crops_are_exported_at_the_recipes_standard_resolution(tmp_path):
    from vrag_data.export.images import ImageStore
    from vrag_data.schema.geometry_types import Box
    from vrag_data.schema.records import ImageRef

    ws = build_workspace(tmp_path / "ws")
    store = ImageStore(ws, tmp_path / "out", "qwen2.5-vl")
    w, h = Image.open(ws.page_image("docA_2")).size
    ref = ImageRef(page_id="docA_2", box=Box.from_raw((0, 0, w / 10, h / 10), w, h))  # a small crop
    small = Image.open(tmp_path / "out" / store.materialise(ref, 401408)).size
    std = Image.open(tmp_path / "out" / store.materialise(ref, 401408, 200704)).size
    assert small[0] * small[1] < 200704  # without a standard resolution the crop stays tiny
    # with it (VRAG-RL's 256 x 28 x 28): scaled up to the same grid the teacher was shown, multiples of 28
    assert std == tuple(reversed(smart_resize(small[1], small[0], 28, 200704, 401408)))
    assert std[0] * std[1] >= 200704 and std[0] % 28 == 0 and std[1] % 28 == 0


def test_a_copied_export_loads_with_datasets_and_relative_paths(exported, tmp_path):
    import shutil

    _, out, _ = exported
    moved = tmp_path / "elsewhere" / "export"
    shutil.copytree(out, moved)  # the workspace and the original folder are out of the picture
    sft = datasets.load_dataset(str(moved / "hf"), "sft", split="train")
    rl = datasets.load_dataset(str(moved / "hf"), "rl", split="train")
    assert len(sft) > 0 and len(rl) > 0 and set(sft.column_names) != set(rl.column_names)
    assert rl[0]["extra_info"]["answer"]  # what VRAG-RL's trainer reads
    lf = yaml.safe_load(next((moved / "llamafactory").glob("sft_*.yaml")).read_text())
    assert (lf["dataset_dir"], lf["media_dir"]) == ("llamafactory", ".")
    info = json.loads((moved / lf["dataset_dir"] / "dataset_info.json").read_text())
    assert lf["dataset"] in info
    for f in (moved / "llamafactory").rglob("*.json"):
        if f.name not in ("dataset_info.json", "ds_z3_config.json"):  # the rest are record shards
            for row in json.loads(f.read_text()):
                assert all((moved / lf["media_dir"] / p).is_file() for p in row["images"])


def test_a_second_export_into_the_same_folder_stops_with_one_line(tmp_path):
    from vrag_data.errors import VragError
    from vrag_data.store.run import ExportLock

    ws = build_workspace(tmp_path / "ws")
    out = tmp_path / "o"
    out.mkdir()
    with ExportLock(out), pytest.raises(VragError, match="another export is writing this folder"):
        export_run(ws, "r1", formats=["verl"], out_dir=out, recipes=run_recipes())
    assert export_run(ws, "r1", formats=["verl"], out_dir=out, recipes=run_recipes()).counts["verl"]  # once free, it runs


@pytest.mark.slow
def test_two_exports_of_one_run_are_byte_identical(tmp_path_factory, tmp_path):
    """Same run, same settings: every file of the export is the same bytes (only summary.json names its folder)."""
    import hashlib
    import shutil

    from tests.support.synth_workspace import cli, sample_workspace

    ws = tmp_path / "ws"
    shutil.copytree(sample_workspace(tmp_path_factory.getbasetemp()), ws, ignore=shutil.ignore_patterns("runs"))
    cli("synth", "-w", ws, "--recipe", "vrag_rl", "--policy", "oracle", "--limit", "3", "--run", "rep", "-q")
    cli("filter", "-w", ws, "--run", "rep")
    digests = []
    for name in ("a", "b"):
        out = tmp_path / name
        cli("export", "-w", ws, "--run", "rep", "--out", out)
        digests.append({str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in out.rglob("*") if p.is_file() and p.name != "summary.json"})
    assert len(digests[0]) > 20 and digests[0] == digests[1]


def test_nothing_kept_names_the_filter_its_reasons_and_the_option(tmp_path):
    """A run whose filter dropped every trajectory: the one error line says which filter dropped most, its reasons
    counted (per-trajectory details folded) and the config key that changes it, not only the statuses. The fixture's
    trajectories are of two recipes (tr7 is EVisRAG's), so the line names the recipe."""
    from vrag_data.schema.records import Verdict
    from vrag_data.store import write_records

    ws = build_workspace(tmp_path / "ws")
    verdicts = [Verdict(run_id="r1", traj_id=f"tr{i}", task_id="t", filter="retrieval_completeness", passed=False,
                        reason=f"gold pages never retrieved: ['docA_{i}']") for i in range(1, 6)]
    verdicts += [Verdict(run_id="r1", traj_id="tr6", task_id="t", filter="correctness", passed=False,
                         reason="rules score 0.00 < 0.5: 'x' vs 'blue'")]
    verdicts += [Verdict(run_id="r1", traj_id="tr7", task_id="t", filter="correctness", passed=False, reason="no final answer (status error)")]
    write_records(ws.path("runs", "r1", "verdicts", "v.parquet"), verdicts, Verdict)
    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "r1", "--format", "hf", "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    line = " ".join(res.output.split())  # the console wraps long lines
    assert "0 of 7 trajectories kept" in line
    assert ("the filter that dropped most: vrag_rl: retrieval_completeness dropped 5 of 7 (reasons: gold pages never "
            "retrieved: [...] x5); change it with filters.chains.vrag_rl (leave retrieval_completeness out); no export "
            "written") in line, line


def test_export_that_keeps_fewer_says_why_in_its_summary(tmp_path):
    """Some trajectories dropped: the summary (summary.json, which the CLI prints) lists the filters that dropped them, most
    first, each with its counted reasons and its settings (config keys with their values now)."""
    from vrag_data.filters.quality import Correctness
    from vrag_data.schema.records import Verdict
    from vrag_data.store import write_records

    ws = build_workspace(tmp_path / "ws")
    verdicts = [Verdict(run_id="r1", traj_id=f"tr{i}", task_id="t", filter="correctness", passed=i > 2,
                        reason=f"rules score 0.00 < 0.5: 'a{i}' vs 'b'") for i in range(1, 7)]
    write_records(ws.path("runs", "r1", "verdicts", "v.parquet"), verdicts, Verdict)
    recipes = [r.configure(None) for r in run_recipes()]
    recipes = [r if r.name != "vrag_rl" else r.with_filter_options(["correctness"], {"correctness": {"threshold": 0.8}})
               for r in recipes]
    assert any(isinstance(f, Correctness) for f in recipes[0].filters)
    out = tmp_path / "o"
    s = export_run(ws, "r1", formats=["hf"], out_dir=out, recipes=recipes)
    assert s.n_kept == 4 and s.n_trajectories == 7
    want = ("correctness dropped 2 of 7 (reasons: rules score 0.00 < 0.5: '...' vs '...' x2); change it with "
            "filters.options.vrag_rl.correctness.threshold=0.8, filters.chains.vrag_rl (leave correctness out)")
    dropped = json.loads((out / "summary.json").read_text())["stats"]["dropped"]
    assert dropped[0] == want, dropped
