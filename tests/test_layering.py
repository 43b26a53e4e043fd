"""The project's layering, read from the code (every `import`, also those inside functions and `TYPE_CHECKING`
blocks: a type-only import is still a dependency of the design): no import circles between modules or between
folders, no arrow back up, and the rules that keep recipes a unit:

- entry points (the CLI, the config check, the recipe registry and the flows) resolve recipes by name; the stages
  below them receive the `Recipe` object and never reach the registry, `pipelines/`, the CLI or the flows;
- the run config never imports a stage (only the stages' leaf settings models, `<stage>/options.py`);
- the trainer never imports the CLI; only the CLI starts the flows.
"""

from __future__ import annotations

import ast
import re
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "vrag_data"

# Top to bottom; an import may point to its own layer or any layer below it, never above.
LAYERS: list[tuple[str, set[str]]] = [
    ("entry points", {"cli", "config_check", "recipe", "recipe.registry", "recipe.runs"}),
    ("stages that take a recipe", {"curate", "synth", "train", "export", "report", "qgen", "student"}),
    ("the recipe type", {"recipe.base", "recipe.spec", "recipe.episode_state"}),
    ("building blocks", {"filters", "augment", "teacher", "env", "retrieve", "rewards", "ingest", "tasks", "sample"}),
    ("storage", {"store"}),
    ("run config", {"config"}),
    ("base", {"schema", "errors", "ids", "yamlio", "secrets", "keys", "version", "offline", "process", "progress", "inert", "plugins"}),
]
REGISTRY = {"vrag_data.recipe", "vrag_data.recipe.registry", "vrag_data.recipe.runs"}
ENTRY = {"vrag_data.cli", "vrag_data.config_check", *REGISTRY}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> dict[str, int]:
    """Imported project modules -> first line (an imported name that is a submodule counts as that module)."""
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        if name.split(".")[0] in ("vrag_data", "pipelines", "flows"):
            found.setdefault(name, line)

    class Visitor(ast.NodeVisitor):
        def visit_Import(self, node: ast.Import) -> None:
            for a in node.names:
                add(a.name, node.lineno)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.level == 0:
                add(node.module, node.lineno)
                for a in node.names:
                    if f"{node.module}.{a.name}" in known:
                        add(f"{node.module}.{a.name}", node.lineno)

        def visit_Call(self, node: ast.Call) -> None:  # importlib.import_module("literal")
            if getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    add(arg.value, node.lineno)
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(), str(path)))
    return found


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    files = {_module_name(p): p for p in sorted(LIB.rglob("*.py"))}
    known = set(files)
    return {m: {d: ln for d, ln in _imports(p, known).items() if d != m} for m, p in files.items()}


def _layer(module: str) -> int | None:
    rel = module.removeprefix("vrag_data.")
    best: tuple[int, int] | None = None  # (specificity, layer index): the longest matching prefix wins
    for i, (_, members) in enumerate(LAYERS):
        for m in members:
            if rel == m or rel.startswith(m + "."):
                cand = (m.count(".") + 1, i)
                if best is None or cand > best:
                    best = cand
    return None if best is None else best[1]


def _where(module: str) -> str:
    return module.replace(".", "/")


@pytest.mark.slow
def test_every_library_module_has_a_layer():
    missing = [m for m in _graph() if m != "vrag_data" and _layer(m) is None]
    assert not missing, f"add these modules to a layer in LAYERS: {missing}"


def _circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    g = {m: {d for d in deps if d in _graph()} for m, deps in _graph().items()}
    circles = _circles(g)
    assert not circles, f"import circles: {circles}"


def _folder(module: str) -> str:
    """vrag_data.qgen.grid -> vrag_data.qgen; a module at the top (vrag_data.config) is its own node."""
    return ".".join(module.split(".")[:2])


def test_no_circles_between_folders():
    # vrag_data/<folder>/ as one node: a module of one folder importing another folder that imports it back is a
    # circle in the design even when no two modules form one
    g: dict[str, set[str]] = {}
    for m, deps in _graph().items():
        g.setdefault(_folder(m), set()).update(_folder(d) for d in deps if d in _graph() and _folder(d) != _folder(m))
    for deps in list(g.values()):
        for d in deps:
            g.setdefault(d, set())
    circles = _circles(g)
    assert not circles, f"circles between folders: {circles}"


def test_no_arrow_points_back_up():
    up = []
    for m, deps in _graph().items():
        lm = _layer(m)
        if lm is None:
            continue
        for d, line in deps.items():
            ld = _layer(d) if d.startswith("vrag_data.") else None
            if ld is not None and ld < lm and not (d.endswith(".options") and m == "vrag_data.config"):
                up.append(f"{_where(m)}.py:{line} imports {d} ({LAYERS[lm][0]} -> {LAYERS[ld][0]})")
    assert not up, "\n".join(up)


def test_stages_never_reach_the_registry_pipelines_cli_or_flows():
    bad = []
    for m, deps in _graph().items():
        if any(m == e or m.startswith(e + ".") for e in ENTRY):
            continue
        for d, line in deps.items():
            if d in REGISTRY or d.split(".")[0] in ("pipelines", "flows") or d == "vrag_data.cli" or d.startswith("vrag_data.cli."):
                bad.append(f"{_where(m)}.py:{line} imports {d}")
    assert not bad, "stages get the recipe object from their caller:\n" + "\n".join(bad)


def test_settings_models_the_config_imports_are_leaves():
    base = {m for m in _graph() if _layer(m) == len(LAYERS) - 1}
    for d in _graph()["vrag_data.config"]:
        if d.endswith(".options"):
            assert set(_graph()[d]) <= base | {"vrag_data"}, f"{d} must import base modules only (the config imports it)"


def test_the_trainer_never_imports_the_cli_and_flows_stay_out_of_the_library():
    # the CLI starts the flows (`vrag-data run`, `up`); nothing else in the library knows Prefect's layer
    offenders = [f"{m} -> {d}" for m, deps in _graph().items() for d in deps
                 if (m.startswith("vrag_data.train") and d.startswith("vrag_data.cli"))
                 or (d.split(".")[0] == "flows" and not m.startswith("vrag_data.cli"))]
    assert not offenders, offenders


def test_the_layering_test_sees_a_violation(tmp_path):
    # the checker itself: an upward import inside a function is found, with its line
    p = tmp_path / "mod.py"
    p.write_text("def f():\n    from vrag_data.recipe.registry import get_recipe\n    return get_recipe\n")
    assert _imports(p, {"vrag_data.recipe.registry"}) == {"vrag_data.recipe.registry": 2}
    assert _layer("vrag_data.filters.registry") > _layer("vrag_data.recipe.base") > _layer("vrag_data.recipe.registry")


MAX_FUNCTION_LINES = 80  # DESIGN.md "Style": a function longer than this is split along its seams


def test_no_library_function_is_longer_than_80_lines():
    long = []
    for path in sorted(LIB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these along their seams: " + "; ".join(long)


def test_tests_mirror_the_package_and_are_named_by_subject():
    """tests/<package>/ for each package's tests (the cross-cutting fault and user-path tests in tests/ itself);
    no test module named after the round that wrote it."""
    tests = REPO / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("support", "data", "__pycache__")}
    stray = sorted(f for f in folders if not (LIB / f).is_dir() and not (REPO / f / "__init__.py").is_file())
    assert folders and not stray, f"test folders that name no package (vrag_data/<name> or flows/): {stray}"
    rounds = [str(p.relative_to(tests)) for p in tests.rglob("test_*.py") if re.search(r"round_?\d", p.stem)]
    assert not rounds, rounds
