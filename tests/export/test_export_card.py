"""The card is fit to publish: licence, sources with their licences, columns, splits; publishing refuses what it must;
RL rows keep `extra_info.sufficient`; the pages RL episodes search travel with the export (`search/`)."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from vrag_data.config import ExportConfig  # noqa: E402
from vrag_data.errors import VragError  # noqa: E402
from vrag_data.export import export_run  # noqa: E402
from vrag_data.export.card import publish_problems  # noqa: E402
from vrag_data.export.hf import hub_copy  # noqa: E402
from vrag_data.retrieve import build_index  # noqa: E402
from vrag_data.retrieve.server import create_app  # noqa: E402
from vrag_data.store import Workspace  # noqa: E402

FORMATS = ["hf", "llamafactory", "verl", "easyr1"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    ws = build_workspace(root / "ws")
    build_index(ws)
    cfg = ExportConfig(license="cc-by-4.0", source_licenses={"docA": "cc0-1.0", "slidevqa": "research-only"})
    summary = export_run(ws, "r1", FORMATS, out_dir=root / "out", recipes=run_recipes(), config=cfg)
    return ws, root, summary


def test_card_names_licence_sources_columns_and_splits(exported):
    _, root, summary = exported
    card = (root / "out" / "hf" / "README.md").read_text()
    header = card.split("---")[1]
    assert "license: cc-by-4.0" in header
    assert "| docA | cc0-1.0 |" in card and "| docB | unknown |" in card and "| slidevqa | research-only |" in card
    assert "| extra_info |" in card and "| reference_page |" in card and "| messages |" in card  # columns
    assert "## Splits" in card and "| hf/rl | val | 1 |" in card
    assert summary.provenance["publish_problems"] == [
        "benchmarks ['slidevqa'] are research-only or of unknown licence: name them in export.source_licenses, or set "
        "export.allow_research_only (--allow-research-only)",
        "documents ['docB'] are research-only or of unknown licence: name them in export.source_licenses, or set "
        "export.allow_research_only (--allow-research-only)",
    ]


def test_publish_problems_rules():
    assert publish_problems(None, {}, False) == ["the export has no licence: set export.license (or --license)"]
    assert publish_problems("mit", {"documents": {"a": "research-only"}}, True) == []
    assert publish_problems("mit", {"documents": {"a": "apache-2.0"}}, False) == []
    assert len(publish_problems("mit", {"documents": {"a": "Research use only"}}, False)) == 1


def test_push_to_hub_refused_before_any_upload(tmp_path, monkeypatch):
    """A repo and a token set, a research-only source: the export stops with one line; nothing is uploaded (the
    machine has no network: an upload attempt would fail with another error)."""
    ws = build_workspace(tmp_path / "ws")
    monkeypatch.setenv("VRAG_TEST_HF_TOKEN", "hf_not_a_token")
    cfg = ExportConfig(license="cc-by-4.0", hub_repo="someone/data", hub_token_env="VRAG_TEST_HF_TOKEN")
    with pytest.raises(VragError, match=r"export.hub_repo someone/data: not published: benchmarks \['slidevqa'\] .*; documents \['docA', 'docB'\]"):
        export_run(ws, "r1", ["hf"], out_dir=tmp_path / "out", recipes=run_recipes(), config=cfg)


def test_hf_folder_loads_from_a_copy_and_holds_each_image_once(exported, tmp_path, monkeypatch):
    """The default `folder` layout: a plain copy of hf/ loads its images from another working directory; hf/data/images
    holds each image its metadata files name once, and it is the export's only image folder (no images/ beside it)."""
    _, root, _ = exported
    hf = root / "out" / "hf"
    copy = tmp_path / "elsewhere" / "hf"
    shutil.copytree(hf, copy)
    monkeypatch.chdir(tmp_path)
    row = next(r for r in datasets.load_dataset(str(copy), "sft", split="train") if r["traj_id"] == "tr1")
    assert [im.size for im in row["images"]][0] == (532, 728)
    assert len(datasets.load_dataset(str(copy), "rl", split="val")) == 1
    files = sorted((hf / "data" / "images").iterdir())
    named = {n for f in (hf / "data").glob("*.parquet") for r in pq.read_table(f).to_pylist() for n in r["images_file_names"]}
    assert files and named == {f"images/{f.name}" for f in files}
    assert len({hashlib.sha256(f.read_bytes()).digest() for f in files}) == len(files)
    assert not (root / "out" / "images").exists()


def test_hub_copy_embeds_referenced_images(exported, tmp_path, monkeypatch):
    """`hf_images: reference` names the export's images/; the copy `push_to_hub` uploads embeds them and loads alone."""
    ws, root, _ = exported
    out = tmp_path / "out"
    export_run(ws, "r1", ["hf"], out_dir=out, recipes=run_recipes(), config=ExportConfig(hf_images="reference"))
    local = pq.read_table(next((out / "hf" / "data").glob("sft-train-*.parquet"))).to_pylist()
    assert all(im["bytes"] is None and im["path"].startswith("images/") for r in local for im in r["images"])
    copy = hub_copy(out, tmp_path / "hub" / "hf")
    monkeypatch.chdir(tmp_path / "hub")  # away from the export: the copy needs no images/ folder
    row = next(r for r in datasets.load_dataset(str(copy), "sft", split="train") if r["traj_id"] == "tr1")
    assert [im.size for im in row["images"]][0] == (532, 728)


def test_sufficient_kept_in_verl_and_hf_rows(exported):
    _, root, _ = exported
    rows = [r for f in sorted((root / "out" / "verl").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    by_id = {r["id"]: r["extra_info"]["sufficient"] for r in rows}
    assert by_id["t2:evisrag"] is True and by_id["t1:vrag_rl"] is None  # docB_1, t2's gold page, is shown
    hf = [r for f in sorted((root / "out" / "hf" / "data").glob("rl-*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert {r["id"]: r["extra_info"]["sufficient"] for r in hf} == by_id


def test_search_folder_serves_the_pages_the_rows_name(exported):
    """`search/` is a folder `vrag-data serve-search -w search` serves: the real app over it, the workspace unused."""
    ws, root, summary = exported
    search = root / "out" / "search"
    assert summary.stats["search"]["mode"] == "copy" and summary.stats["search"]["pages"] == 5
    assert sorted(p.name for p in (search / "pages").iterdir()) == [f"{s}_{p}.jpg" for s, n in (("docA", 3), ("docB", 2)) for p in range(1, n + 1)]
    client = TestClient(create_app(Workspace(str(search))))
    hits = client.get("/search", params={"queries": "docB page 1", "top_k": 5}).json()[0]
    assert hits and all(Path(h["image_file"]).is_file() and Path(h["image_file"]).is_relative_to(search) for h in hits)
    assert client.get(f"/pages/{Path(hits[0]['image_file']).name}").status_code == 200
    assert "vrag-data serve-search -w search" in (search / "README.md").read_text()
