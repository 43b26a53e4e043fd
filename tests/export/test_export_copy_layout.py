"""An export as users move it: `cp -r` (what `scp -r`, `rsync -a` without `-H` and a zip do too: a hard link becomes a
second file) must not grow it. Every format names the export's one image folder by a relative path, so the copy is
the size of the export as written and holds each distinct image once; a finished export names no folder of the machine
it was written on and keeps no lock or bookkeeping file."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from tests.support.oracle_runs import oracle_runs
from vrag_data.cli.main import app
from vrag_data.export.formats import FormatDefaults, register_format, unregister_format

FORMATS = ["hf", "llamafactory", "verl", "easyr1"]


@pytest.fixture(scope="module")
def evisrag_export(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    ws, run_ids = oracle_runs(root / "ws")
    out = root / "export"
    args = ["export", "-w", str(ws.root), "--run", run_ids["evisrag"], "--out", str(out)]
    res = CliRunner().invoke(app, [*args, *(x for f in FORMATS for x in ("--format", f))])
    assert res.exit_code == 0, res.output
    return ws, out


def _bytes(root: Path) -> tuple[int, int, int]:
    """(bytes of every file, bytes of the jpg files, bytes of the distinct jpg files by content) under `root`."""
    total = jpg = 0
    distinct: dict[str, int] = {}
    for p in (p for p in root.rglob("*") if p.is_file()):
        size = p.stat().st_size
        total += size
        if p.suffix == ".jpg":
            jpg += size
            distinct.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), size)
    return total, jpg, sum(distinct.values())


def test_a_copied_evisrag_export_is_its_size_as_written(evisrag_export, tmp_path, monkeypatch):
    _, out = evisrag_export
    written, _, _ = _bytes(out)
    copy = tmp_path / "training-machine" / "export"
    shutil.copytree(out, copy)  # what `cp -r` does: each hard link becomes a file of its own
    copied, jpg, distinct = _bytes(copy)
    print(f"evisrag export: {written} bytes as written, {copied} after cp -r; jpg {jpg} = {jpg / distinct:.2f}x distinct")
    assert copied == written and jpg == distinct > 0  # one file per distinct image, none a second time
    assert [p.name for p in copy.iterdir() if p.is_dir() and any(p.rglob("*.jpg"))] == ["hf"]  # one image folder
    # every format names those files relative to the export folder: the copy loads from a third working directory
    monkeypatch.chdir(tmp_path)
    ds = datasets.load_dataset(str(copy / "hf"), "sft", split="train")
    assert all(im.size[0] > 0 for row in ds for im in row["images"])
    rows = [json.loads(line) for f in sorted((copy / "easyr1").rglob("*.jsonl")) for line in f.read_text().splitlines()]
    named = {p for r in rows for p in r["image"]}
    assert named and all(p.startswith("hf/data/images/") and (copy / p).is_file() for p in named)
    lf = [e for f in sorted((copy / "llamafactory").rglob("part-*.json")) for e in json.loads(f.read_text())]
    assert all((copy / p).is_file() for e in lf for p in e["images"])


def test_a_finished_export_names_no_local_folder_and_keeps_no_lock(evisrag_export):
    ws, out = evisrag_export
    assert not (out / ".export.lock").exists() and not (out / ".export-run").exists()
    summary = (out / "summary.json").read_text()
    assert str(out) not in summary and str(Path(ws.root).resolve()) not in summary and '"/' not in summary
    assert json.loads(summary)["run_id"]


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class _Failing(FormatDefaults):
    """A format whose writer fails once every record is written: the export cannot finish."""

    name, label, entry, sft, rl = "failing", "failing", "failing", True, False

    def open(self, ctx):  # noqa: ANN001, ANN201
        class W:
            def write_sft(self, rec, system):  # noqa: ANN001, ANN202
                pass

            def close(self):  # noqa: ANN202
                raise OSError("disk gone")

        return W()


def test_a_failed_export_over_an_earlier_one_puts_it_back_with_its_images(evisrag_export, tmp_path):
    """The image folder inside hf/ stays in place while the earlier export is set aside (its files are reused); an
    export that cannot finish leaves the earlier one file for file, its hf/data/images/ included; so does putting back
    what a killed export had set aside (a later start does that with `Previous(out, aside, set())`)."""
    from vrag_data.export.previous import ASIDE, Previous

    ws, first = evisrag_export
    out = tmp_path / "export"
    shutil.copytree(first, out)
    run = json.loads((out / "summary.json").read_text())["run_id"]
    before = _digest(out)
    register_format(_Failing())
    try:
        res = CliRunner().invoke(app, ["export", "-w", str(ws.root), "--run", run, "--out", str(out),
                                       "--format", "hf", "--format", "failing"])
    finally:
        unregister_format("failing")
    assert res.exit_code != 0 and "disk gone" in str(res.exception or res.output), res.output
    assert _digest(out) == before
    # killed after setting the earlier export aside: what the next start does puts it back as it was
    Previous.set_aside(out, "hf/data/images")
    assert (out / ASIDE).is_dir() and (out / "hf" / "data" / "images").is_dir()
    Previous(out, out / ASIDE, set()).restore(remove_new_images=False)
    assert _digest(out) == before
