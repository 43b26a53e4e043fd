"""A sixth recipe installed as a package of its own (`tests/support/sixth_plugin`, installed into the test's folder
with its entry points, never into the environment): its role, reward, filter, layout backend and export format are
each one module and one registration line, and no library file names any of them. In a fresh interpreter with the
package on PYTHONPATH it runs as a user types it (`ingest --layout`, `synth --policy oracle`, `filter`, `export`), and
the export's own `reward/compute_score.py` scores its rows in a bare interpreter (`python -I -S`: no vrag-data, no
site-packages) with values computed by hand. Installing it changes no shipped recipe's run id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pymupdf

from tests.support.plugin_site import install_package
from tests.support.shipped import SHIPPED

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "support" / "sixth_plugin"
GROUPS = ("recipes", "roles", "rewards", "filters", "layout_backends", "export_formats")
FACTS = [("North", "412"), ("South", "389"), ("West", "275")]

# What the installed package runs, in its own interpreter: a config naming the plugin's role is parsed before anything
# else is imported (parsing does not depend on import order), then every stage, then the shipped recipes' run ids.
DRIVER = r'''
import json, sys
from vrag_data.config import parse_config

parsed = parse_config({"roles": {"checker": {"same_as": "policy"}, "policy": {"kind": "oracle"}}})
from typer.testing import CliRunner
from vrag_data.cli.main import app

def cli(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, f"vrag-data {' '.join(map(str, args))} failed ({res.exit_code}): {res.output}"
    return res.output

corpus, ws, out = sys.argv[1:4]
cli("ingest", "-w", ws, corpus, "--layout", "boxed_facts", "--ocr", "off", "--workers", "1", "--quiet")
cli("tasks", "import", f"{corpus}/qa.jsonl", "-w", ws)
cli("synth", "-w", ws, "--recipe", "checked_crop", "--policy", "oracle", "--run", "six", "-q")
cli("filter", "-w", ws, "--run", "six")
cli("export", "-w", ws, "--run", "six", "--out", out, "--format", "verl", "--format", "answers_tsv")
sys.path.insert(0, sys.argv[4])
from run_ids import run_ids
print(json.dumps({"checker": parsed.roles["checker"].same_as, "run_ids": run_ids()}))
'''


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


def _run_ids_module(folder: Path) -> Path:
    """`run_ids()`: each shipped recipe's run id under its own config (configs/recipes/<recipe>.yaml) and under
    `--policy oracle`, computed the same way with and without the plugin installed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_ids.py").write_text(f'''
from vrag_data.cli.synth import apply_policy_flags
from vrag_data.config import load_config, parse_config
from vrag_data.recipe import resolve_recipe
from vrag_data.synth.run import default_run_id


def run_ids():
    out = {{}}
    for name in {SHIPPED!r}:
        cfg = load_config({str(ROOT / "configs" / "recipes")!r} + f"/{{name}}.yaml")
        out[f"{{name}}/own config"] = default_run_id(resolve_recipe(name, cfg), cfg)
        base = parse_config({{"roles": {{"student": {{"kind": "extractive"}}}}}})
        cfg = apply_policy_flags(base, "oracle", None, None, None, resolve_recipe(name, base))
        out[f"{{name}}/oracle"] = default_run_id(resolve_recipe(name, cfg), cfg)
    return out
''')
    return folder


def _installed(tmp_path: Path) -> Path:
    return install_package(tmp_path, PLUGIN, {f"vrag_data.{g}": "sixth = sixth_plugin" for g in GROUPS})


PROBE = r'''
import importlib.util, json, os, sys
bundle, rows = sys.argv[1], json.loads(open(sys.argv[2]).read())
spec = importlib.util.spec_from_file_location("compute_score", os.path.join(bundle, "compute_score.py"))
verl = importlib.util.module_from_spec(spec); spec.loader.exec_module(verl)
out = []
for r in rows:
    gold = r["gold"]
    out.append([verl.compute_score(r["data_source"], text, gold, r["extra_info"], judge="rules")["score"]
                for text in (f"<answer>{gold}</answer>", "<answer>about nine hundred million</answer>", "<answer>1</answer>")])
print(json.dumps({"scores": out, "site": "site" in sys.modules,
                  "vrag_data": sorted(m for m in sys.modules if m.split(".")[0] in ("vrag_data", "sixth_plugin"))}))
'''


def test_a_sixth_recipe_installed_as_a_package_runs_every_stage_and_its_export_scores_its_rows(tmp_path):
    site, helpers = _installed(tmp_path), _run_ids_module(tmp_path / "helpers")
    corpus, ws, out = _corpus(tmp_path / "corpus"), tmp_path / "ws", tmp_path / "export"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(corpus), str(ws), str(out), str(helpers)], env=env,
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    assert child["checker"] == "policy"  # the plugin's role is known to a config parsed before any recipe import

    # the run holds the roles its recipe calls, nothing another recipe declares
    manifest = json.loads((ws / "runs" / "six" / "manifest.json").read_text())
    assert set(manifest["config"]["roles"]) == {"policy", "checker", "judge"}
    assert manifest["config"]["roles"]["checker"]["same_as"] == "policy"
    # its backend's blocks, its filter's verdicts, its format's file
    verdicts = [json.loads(line) for f in sorted((ws / "runs" / "six" / "verdicts").rglob("*.jsonl"))
                for line in f.read_text().splitlines()] or _parquet_verdicts(ws)
    mine = [v for v in verdicts if v["filter"] == "checker_agreed"]
    assert len(mine) == 6 and all(v["passed"] and v["reason"].startswith("checker: CONFIRMED") for v in mine)
    rows = [r for f in sorted((out / "verl").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert len(rows) == 6 and all(r["extra_info"]["reward"] == "checked_answer" and r["data_source"] == "checked_source" for r in rows)
    # the turn budget crosses the stages with one meaning (free policy turns): the export records the recipe's 6
    assert json.loads((out / "summary.json").read_text())["provenance"]["max_turns"] == {"checked_crop": 6}
    tsv = sorted(line.split("\t") for line in (out / "answers" / "rows.tsv").read_text().splitlines())
    assert sorted(t[2] for t in tsv) == ["275", "285", "389", "399", "412", "422"] and {t[1] for t in tsv} == {"checked_answer"}

    # the export's own reward bundle carries the plugin's reward module and scores the rows with nothing installed:
    # right and brief 0.75 + 0.25 = 1.0; wrong and long (31 characters) 0 + 0; wrong but brief ("1") 0 + 0.25
    assert (out / "reward" / "vrag_reward" / "rewards" / "kinds" / "plugin_sixth_plugin_reward.py").is_file()
    cases = [{"data_source": r["data_source"], "gold": r["reward_model"]["ground_truth"], "extra_info": r["extra_info"]}
             for r in rows]
    (tmp_path / "rows.json").write_text(json.dumps(cases, default=str))
    (tmp_path / "probe.py").write_text(PROBE)
    bare = subprocess.run([sys.executable, "-I", "-S", str(tmp_path / "probe.py"), str(out / "reward"), str(tmp_path / "rows.json")],
                          capture_output=True, text=True, env={}, cwd=tmp_path, timeout=120)
    assert bare.returncode == 0, bare.stderr[-3000:]
    got = json.loads(bare.stdout.strip().splitlines()[-1])
    assert got["site"] is False and got["vrag_data"] == []
    assert got["scores"] == [[1.0, 0.0, 0.25]] * 6

    # installing the package changed no shipped recipe's run id (under its own config, and under --policy oracle)
    sys.path.insert(0, str(helpers))
    try:
        from run_ids import run_ids

        assert child["run_ids"] == run_ids()
    finally:
        sys.path.remove(str(helpers))
        sys.modules.pop("run_ids", None)


def _parquet_verdicts(ws: Path) -> list[dict]:
    return [r for f in sorted((ws / "runs" / "six" / "verdicts").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
