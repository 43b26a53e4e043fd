"""One owner of the run folder (`vrag_data.store.run.RunDir`): every module asks it for paths, and `report` and
`export` read a run's verdict freshness by the same rule, so after a resumed synth they agree the verdicts are out
of date (the export refuses, the report says so and counts no kept trajectory from them) until `filter` re-runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.support.synth_workspace import sample_workspace
from vrag_data.cli.main import app
from vrag_data.store.run import RunDir

REPO = Path(__file__).resolve().parents[2]
RECIPE = "vrag_rl"  # filters run offline (rules judge, no student)


def vrag(*args: object) -> tuple[int, str]:
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


def ok(*args: object) -> str:
    code, out = vrag(*args)
    assert code == 0, f"vrag-data {' '.join(map(str, args))} failed ({code}): {out}"
    return out


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return sample_workspace(tmp_path_factory.getbasetemp())


def _report(ws: Path, run: str) -> tuple[str, dict, str]:
    """(CLI output, {recipe row of the summary}, report.html) of `vrag-data report --run`."""
    out = ok("report", "-w", ws, "--run", run, "--viewer-limit", "5")
    con = duckdb.connect(str(ws / "report.duckdb"), read_only=True)
    try:
        kept, n = con.execute("SELECT count(*) FILTER (WHERE kept), count(*) FROM trajectories WHERE run_id = ?", [run]).fetchone()
        state = con.execute("SELECT verdict_state FROM runs WHERE run_id = ?", [run]).fetchone()[0]
        funnel = con.execute("SELECT n FROM stage_funnel WHERE recipe = ? AND stage = 'kept'", [RECIPE]).fetchone()[0]
    finally:
        con.close()
    return out, {"kept": kept, "trajectories": n, "state": state, "funnel_kept": funnel}, (ws / "report.html").read_text()


@pytest.mark.slow
def test_report_and_export_agree_on_stale_verdicts(ws, tmp_path):
    run = "stale-check"
    ok("synth", "-w", ws, "--recipe", RECIPE, "--policy", "oracle", "--limit", "2", "--run", run, "--quiet")
    ok("filter", "-w", ws, "--run", run)
    rd = RunDir(str(ws / "runs" / run))
    assert rd.verdict_state()[0] == "fresh"
    n_first = len(rd.newest())
    assert n_first == 2
    kept_before = sum(rd.verdicts().keep(t) for t in rd.episodes())
    out, row, _ = _report(ws, run)
    assert "verdicts out of date" not in out and row["state"] == "fresh" and row["kept"] == kept_before

    # synth resumed with every task: new episodes the verdicts never saw
    ok("synth", "-w", ws, "--recipe", RECIPE, "--policy", "oracle", "--run", run, "--quiet")
    n_all = len(rd.newest())
    assert n_all > n_first
    assert rd.verdict_state() == ("stale", f"{n_all} episodes now, {n_first} when the verdicts were written")
    code, exp = vrag("export", "-w", ws, "--run", run, "--out", tmp_path / "stale", "--format", "verl")
    assert code == 2 and "vrag-data filter" in exp and "out of date" in exp
    out, row, html = _report(ws, run)
    hint = f"run {run}: verdicts out of date ({n_all} episodes now, {n_first} when the verdicts were written): re-run `vrag-data filter"
    assert hint in " ".join(out.split())  # the CLI line (rich may wrap it)
    assert hint in html
    assert row == {"kept": 0, "trajectories": n_all, "state": "stale", "funnel_kept": 0}  # nothing kept from stale verdicts
    summary = [ln for ln in out.splitlines() if ln.strip().startswith(RECIPE)]
    assert summary and summary[0].split()[1] == str(n_all)  # traj column: every episode, kept column: none counted
    assert summary[0].split()[6] == "–"

    # filter again: both agree the verdicts are fresh
    ok("filter", "-w", ws, "--run", run)
    assert rd.verdict_state()[0] == "fresh"
    ok("export", "-w", ws, "--run", run, "--out", tmp_path / "fresh", "--format", "verl")
    kept_after = sum(rd.verdicts().keep(t) for t in rd.trajectories())
    out, row, html = _report(ws, run)
    assert "verdicts out of date" not in out and "verdicts out of date" not in html
    assert row["state"] == "fresh" and row["kept"] == kept_after == row["funnel_kept"]
    assert row["trajectories"] == rd.count()


# The run folder's names, spelled only in vrag_data/store/ (RunDir). "manifest.json" is also the index's own
# manifest (vrag_data/retrieve owns that layout): a call that names "index" or a module of retrieve/ may spell it.
RUN_FILES = ("requests.sqlite", "fingerprint.json", "filters.parquet", "attempts.parquet", "manifest.json")
RUN_DIRS = ("trajectories", "verdicts", "requests", "student")
INDEX_OWNERS = {REPO / "vrag_data" / "retrieve"}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    index_args = {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and any(isinstance(a, ast.Constant) and a.value == "index" for a in n.args) for a in n.args}
    path_parts: set[int] = set()  # constants that are a path component: `x / "name"`, Path(.., "name"), ws.path(.., "name")
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            path_parts |= {id(n.left), id(n.right)}
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name in ("Path", "path", "join", "joinpath"):
                path_parts |= {id(a) for a in n.args}
    out = []
    in_retrieve = any(o in path.parents for o in INDEX_OWNERS)
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):  # f"{run_dir}/trajectories": a path under a formatted folder
            for prev, part in zip(n.values, n.values[1:], strict=False):
                if isinstance(prev, ast.FormattedValue) and isinstance(part, ast.Constant) and isinstance(part.value, str):
                    m = re.match(r"/([\w.-]+)", part.value)
                    if m and (m.group(1) in RUN_DIRS or m.group(1) in RUN_FILES and not in_retrieve):
                        out.append(f"{path.relative_to(REPO)}:{part.lineno}: {part.value!r}")
        if not isinstance(n, ast.Constant) or not isinstance(n.value, str) or id(n) in docstrings:
            continue
        v = n.value
        parts = re.split(r"[/\\]", v)  # whole path components: "generate_manifest.json" is another file
        hit = [f for f in RUN_FILES if f in parts and not (f == "manifest.json" and (in_retrieve or id(n) in index_args))]
        if hit or v.startswith("aug-") or "/aug-" in v or (v in RUN_DIRS and id(n) in path_parts) \
                or any(v.startswith(f"{d}/") for d in RUN_DIRS):
            out.append(f"{path.relative_to(REPO)}:{n.lineno}: {v!r}")
    return sorted(set(out), key=lambda o: int(o.split(":")[1]))


@pytest.mark.slow
def test_only_the_store_spells_the_run_folder_layout():
    store = REPO / "vrag_data" / "store"
    files = [p for root in ("vrag_data", "flows") for p in sorted((REPO / root).rglob("*.py")) if store not in p.parents]
    assert len(files) > 50
    offenders = [o for p in files for o in _offences(p)]
    assert offenders == []


def test_the_layout_check_catches_each_way_of_spelling_a_path(tmp_path):
    """The check above is only worth its silence if it flags what it claims to: one sample of each spelling."""
    sample = REPO / "flows" / "_layout_sample.py"
    lines = ['from pathlib import Path', 'a = f"{run_dir}/trajectories"', 'b = Path(run_dir) / "verdicts"',
             'c = f"{run_dir}/requests.sqlite"', 'd = ws.path("runs", run_id, "student", "x")', 'e = f"aug-{recipe}.parquet"',
             'f = (p / "manifest.json").is_file()', 'g = ws.path("index", name, "manifest.json")', '"""runs/<run>/verdicts"""']
    sample.write_text("\n".join(lines) + "\n")
    try:
        found = sorted(int(o.split(":")[1]) for o in _offences(sample))
    finally:
        sample.unlink()
    assert found == [2, 3, 4, 5, 6, 7]  # the index manifest (8) and a docstring (9) are not the run folder
