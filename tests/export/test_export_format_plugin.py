"""Export formats as plugins: a format defined here (one JSONL line per SFT record) runs through `export_run` next
to the built-ins, registered in code or announced by an entry point; an unknown name stops with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1]))
from export_fixtures import build_workspace, run_recipes  # noqa: E402

from tests.support.roles import ORACLE_ROLES  # noqa: E402
from vrag_data.cli.main import app  # noqa: E402
from vrag_data.config import RunConfig  # noqa: E402
from vrag_data.config_check import check_run_config  # noqa: E402
from vrag_data.errors import ConfigError, VragError  # noqa: E402
from vrag_data.export import export_run  # noqa: E402
from vrag_data.export.formats import (  # noqa: E402
    FORMATS,
    FormatContext,
    Written,
    format_names,
    register_format,
    unregister_format,
)
from vrag_data.schema.records import SftRecord  # noqa: E402


class _LinesWriter:
    def __init__(self, ctx: FormatContext) -> None:
        self.out = ctx.out
        self.lines: list[str] = []

    def write_sft(self, rec: SftRecord, system: str) -> None:
        self.lines.append(json.dumps({"id": rec.id, "recipe": rec.recipe, "images": list(rec.images)}))

    def close(self) -> Written:
        (self.out / "toy").mkdir(exist_ok=True)
        (self.out / "toy" / "sft.jsonl").write_text("".join(line + "\n" for line in self.lines))
        return Written({"sft": len(self.lines)})


class ToyFormat:
    """The whole of a new format: what it is called, what it takes, and its four steps."""

    name, label, entry, sft, rl = "toy", "Toy JSONL", "toy/sft.jsonl", True, False

    def open(self, ctx: FormatContext) -> _LinesWriter:
        return _LinesWriter(ctx)

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]:
        return [f"toy: {len(recipes)} recipe(s) in one file"]

    def card_section(self, written: Written) -> str:
        return f"- Toy JSONL (`toy/sft.jsonl`): {written.counts['sft']} lines, one per SFT record\n"

    def publish(self, ctx: FormatContext, written: Written, card: str) -> None:
        (ctx.out / "toy" / "README.md").write_text(card)


@pytest.fixture
def toy_format():
    fmt = register_format(ToyFormat())
    yield fmt
    unregister_format("toy")


def test_a_format_registered_in_code_runs_next_to_the_built_ins(toy_format, tmp_path):
    ws = build_workspace(tmp_path / "ws")
    out = tmp_path / "o"
    s = export_run(ws, "r1", formats=["hf", "toy"], out_dir=out, recipes=run_recipes())

    # the fixture keeps tr1, tr2, tr4, tr5, tr6; tr4's page image is missing and tr5 has no user turn: 3 SFT records
    assert s.formats == ["hf", "toy"]
    assert s.counts == {"hf": {"sft": 3, "rl": 4}, "toy": {"sft": 3}}
    rows = [json.loads(line) for line in (out / "toy" / "sft.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["tr1", "tr2", "tr6"]
    assert {r["id"]: r["recipe"] for r in rows}["tr6"] == "evisrag"
    assert all((out / p).is_file() for r in rows for p in r["images"]) and sum(len(r["images"]) for r in rows) > 0
    # its warning names the recipes with an RL prompt (vrag_rl, evisrag), in the summary and the card
    assert "toy: 2 recipe(s) in one file" in s.warnings
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["toy"] == {"sft": 3}
    card = (out / "README.md").read_text()
    assert "| toy/sft | 3 |" in card and "- Toy JSONL (`toy/sft.jsonl`): 3 lines, one per SFT record" in card
    assert "- toy: 2 recipe(s) in one file" in card
    # publish ran after the card was written and got the card; the HF card has its own configs header above it
    assert (out / "toy" / "README.md").read_text() in card
    assert (out / "hf" / "README.md").read_text().startswith("---\nconfigs:\n- config_name: sft\n")
    assert "configs:" not in card  # the export folder itself is not a dataset: no configs pointing at hf/data


@pytest.mark.slow
def test_the_cli_exports_a_registered_format(toy_format, tmp_path):
    build_workspace(tmp_path / "ws")
    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "r1", "--format", "toy", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "toy: sft=3" in res.output and len((tmp_path / "o" / "toy" / "sft.jsonl").read_text().splitlines()) == 3


def test_a_format_announced_by_an_entry_point_is_one_module_and_one_line(tmp_path, monkeypatch):
    """A package of its own: one module holding the format and one entry-point line in its metadata."""
    site = tmp_path / "site"
    (site / "toy_lines_format-0.1.dist-info").mkdir(parents=True)
    (site / "toy_lines_format-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-lines-format\nVersion: 0.1\n")
    (site / "toy_lines_format-0.1.dist-info" / "entry_points.txt").write_text(
        "[vrag_data.export_formats]\ntoy_lines = toy_lines_format:FORMAT\n")
    (site / "toy_lines_format.py").write_text(textwrap.dedent('''
        import json
        from vrag_data.export.formats import FormatDefaults, Written

        class _Writer:
            def __init__(self, out):
                self.out, self.n = out / "toy_lines", 0
                self.out.mkdir(parents=True, exist_ok=True)
                self.fh = open(self.out / "rl.jsonl", "w")

            def write_rl(self, item):
                self.fh.write(json.dumps({"id": item.rec.id, "answer": item.task.answer}) + "\\n")
                self.n += 1

            def close(self):
                self.fh.close()
                return Written({"rl": self.n})

        class ToyLines(FormatDefaults):
            name, label, entry, sft, rl = "toy_lines", "Toy lines", "toy_lines/rl.jsonl", False, True

            def open(self, ctx):
                return _Writer(ctx.out)

        FORMAT = ToyLines()
    '''))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "toy_lines_format", raising=False)
    monkeypatch.setattr(FORMATS, "loaded", False)  # discovery runs once a process: as in a fresh one, with the package
    try:
        assert "toy_lines" in format_names()
        ws = build_workspace(tmp_path / "ws")
        s = export_run(ws, "r1", formats=["toy_lines", "verl"], out_dir=tmp_path / "o", recipes=run_recipes())
    finally:
        unregister_format("toy_lines")
    # one RL row per (task, recipe) with a kept trajectory and a readable task: (t1, vrag_rl), (t2, vrag_rl),
    # (t2, evisrag), (t4, vrag_rl) -> 4, the same rows verl gets
    assert s.counts["toy_lines"] == {"rl": 4} and s.counts["verl"] == {"train": 3, "val": 1}
    rows = [json.loads(line) for line in (tmp_path / "o" / "toy_lines" / "rl.jsonl").read_text().splitlines()]
    assert sorted(r["answer"] for r in rows) == ["42", "blue", "blue", "nine"]
    assert "- Toy lines: `toy_lines/rl.jsonl`" in (tmp_path / "o" / "README.md").read_text()


def test_an_unknown_format_stops_before_any_work_with_one_line(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    out = tmp_path / "o"
    with pytest.raises(VragError) as err:
        export_run(ws, "r1", formats=["hf", "csv"], out_dir=out, recipes=run_recipes())
    msg = str(err.value)
    assert "\n" not in msg and "unknown export format(s) ['csv']" in msg
    assert ", ".join(format_names()) in msg  # names the known ones (the registry's: an installed format adds to them)
    assert not out.exists()  # nothing written

    res = CliRunner().invoke(app, ["export", "-w", str(tmp_path / "ws"), "--run", "r1", "--format", "csv", "--out", str(out)])
    assert res.exit_code == 2 and "unknown export format(s) ['csv']" in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_the_config_check_names_an_unknown_format_and_the_config_does_not_import_the_export():
    cfg = RunConfig.model_validate({"synth": {"recipes": ["vrag_rl"]}, "export": {"formats": ["verl", "parquet"]},
                                    "roles": ORACLE_ROLES})
    with pytest.raises(ConfigError, match=r"^run\.yaml: export\.formats: unknown export format\(s\) \['parquet'\]; choose from: "):
        check_run_config(cfg, "run.yaml")
    ok = cfg.model_copy(update={"export": cfg.export.model_copy(update={"formats": ["verl"]})})
    check_run_config(ok, "run.yaml")
    probe = "import sys, vrag_data.config; print(sorted(m for m in sys.modules if m.startswith('vrag_data.export')))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_a_recipe_neither_described_nor_passed_stops_the_export_with_one_line(tmp_path):
    """The fixture run has no manifest: the export uses only the recipes its caller resolved and passed."""
    ws = build_workspace(tmp_path / "ws")
    with pytest.raises(VragError, match=r"export hints of recipe 'evisrag' unknown .* pass the resolved recipe") as err:
        export_run(ws, "r1", formats=["verl"], out_dir=tmp_path / "o", recipes=run_recipes()[:1])
    assert "\n" not in str(err.value)


def test_register_format_refuses_an_object_that_is_not_a_format_and_a_taken_name(toy_format):
    with pytest.raises(TypeError, match="is not an export format"):
        register_format(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the name 'toy' is taken by ToyFormat"):
        register_format(ToyFormat())
