"""The reward entry points shipped inside an export (`<export>/reward/`), so a copied export scores rollouts in a
trainer environment that has no vrag-data installed and nothing beyond the Python standard library.

The folder holds a package `vrag_reward`, generated from this installation's reward code: the modules the entry
points import (`REWARD_MODULES`: the scoring code, the action grammar's parser, the box geometry, the judge client, and
every reward module of `vrag_data/rewards/kinds/`, found as the registry finds them), plus the module of every other
reward the exported rows name (`RewardBundle.add`: a plugin's reward, copied into `vrag_reward/rewards/kinds/`, where
the bundle's registry finds it by the same rule). All are copied with their `vrag_data` imports renamed to
`vrag_reward` (so the bundle never mixes with an installed vrag-data). A row whose reward cannot travel (unknown, or
its module imports something beyond the standard library and the modules the bundle carries) stops the export with
one line naming the row, the reward and the import. One file per trainer:

- verl >= 0.9: `reward.custom_reward_function.path=reward/compute_score.py`, `.name=compute_score` (a dict with
  `score`; verl's older top-level `custom_reward_function.*` keys load the same file);
- VRAG-RL's verl fork: `custom_reward_function.path=reward/vragrl_reward.py`, `.name=compute_score` (a float);
- EasyR1: `worker.reward.reward_function=reward/easyr1_reward.py:compute_score` (its batch interface).

The model judge is asked over HTTP with `urllib` (`vrag_data.rewards.judge_client`). `REWARD_MODULES` is the import
closure of the entry points; tests check it against a fresh interpreter without site-packages (`python -I -S`).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import resources
from pathlib import Path

from vrag_data.errors import VragError
from vrag_data.export.io import write_text
from vrag_data.plugins import registering_modules, registers
from vrag_data.rewards.registry import REWARDS, get_reward
from vrag_data.version import __version__

PACKAGE = "vrag_reward"
KINDS = "rewards/kinds"
# the scoring code every bundle carries (package `__init__` files are written empty: the library's re-export everything)
BASE_MODULES = (
    "__init__",
    "env/__init__", "env/geometry", "env/grammar", "env/parse", "env/tags",
    "rewards/__init__", "rewards/answer", "rewards/crop", "rewards/easyr1", "rewards/episode", "rewards/format",
    "rewards/judge_client", "rewards/judge_prompts", "rewards/recipes", "rewards/registry", "rewards/retrieval",
    "rewards/verl", "rewards/vragrl", f"{KINDS}/__init__",
    "inert", "plugins", "secrets",
)
# ... and the library's own rewards, found in their folder as the registry finds them (VRAG-RL's fork dispatches its
# data sources to VRAG-RL's reward whatever the rows name)
REWARD_MODULES = BASE_MODULES + tuple(m.removeprefix("vrag_data.").replace(".", "/")
                                      for m in registering_modules(REWARDS.folder or "", REWARDS.call))
_EMPTY_INIT = {"__init__", "env/__init__", f"{KINDS}/__init__"}


class UnshippableReward(VragError):
    """A row names a reward the bundle cannot carry: the export stops with one line (never a bundle that fails in
    the trainer)."""


def _carried(module: str) -> bool:
    """Whether an import of `module` works inside the bundle: the standard library, or a module the bundle carries."""
    root = module.split(".")[0]
    if root != "vrag_data":
        return root in sys.stdlib_module_names or root == "__future__"
    rel = module.removeprefix("vrag_data").lstrip(".").replace(".", "/") or "__init__"
    return rel in REWARD_MODULES and rel not in _EMPTY_INIT or f"{rel}/__init__" in REWARD_MODULES and f"{rel}/__init__" not in _EMPTY_INIT


def _foreign_import(source: str) -> str | None:
    """The first import of `source` the bundle cannot satisfy (a relative one included); None when there is none."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                return f"a relative import (from {'.' * node.level}{node.module or ''})"
            if not _carried(node.module or ""):
                return repr(node.module)
        elif isinstance(node, ast.Import):
            bad = next((a.name for a in node.names if not _carried(a.name)), None)
            if bad:
                return repr(bad)
    return None


def reward_module(name: str) -> tuple[str, str] | None:
    """(path under `reward/`, text) of the module holding reward `name` when the library's bundle does not carry it
    already (a plugin's); None for the library's own. Raises `UnshippableReward`'s message as ValueError when the
    module cannot travel."""
    reward = get_reward(name)  # an unknown name: one line naming the known ones
    cls = type(reward)
    module = sys.modules.get(cls.__module__)
    if cls.__module__.startswith(f"vrag_data.{KINDS.replace('/', '.')}."):
        return None
    path = getattr(module, "__file__", None)
    if module is None or not path or not path.endswith(".py") or getattr(module, cls.__name__, None) is not cls:
        raise ValueError(f"its class {cls.__qualname__} is not a top-level name of a module file ({cls.__module__}); "
                         "define it at the top of a module of its own")
    source = Path(path).read_text(encoding="utf-8")
    foreign = _foreign_import(source)
    if foreign:
        raise ValueError(f"its module {cls.__module__} imports {foreign}, which the bundle does not carry (only the "
                         "standard library and vrag_data's reward code travel); import only those in the reward's module")
    if not registers(source, REWARDS.call):  # registered by an entry point naming the class
        source += f"\n\nfrom vrag_data.rewards.registry import register_reward  # noqa: E402\nregister_reward({cls.__name__})\n"
    leaf = "plugin_" + re.sub(r"\W", "_", cls.__module__)
    head = (f"# Generated from {cls.__module__} (the module of reward {name!r}, vrag-data {__version__}) for this "
            "export's reward bundle; do not edit.\n")
    return f"{PACKAGE}/{KINDS}/{leaf}.py", head + _IMPORT.sub(lambda m: f"{m.group(1)}{m.group(2)} {PACKAGE}", source)


class RewardBundle:
    """The rewards an export's rows name (`add` per row), and the bundle that scores them (`write`)."""

    def __init__(self) -> None:
        self.extra: dict[str, str] = {}  # path under reward/ -> text, the plugins' reward modules
        self.seen: set[str] = set()

    def add(self, reward: object, row: str) -> None:
        """Row `row` names `reward`: its module goes into the bundle, or the export stops with one line."""
        name = str(reward or "")
        if name in self.seen:
            return
        try:
            if not name:
                raise ValueError("the row names no reward (extra_info.reward)")
            found = reward_module(name)
        except ValueError as err:
            raise UnshippableReward(f"export: row {row} names reward {name!r}, which the reward bundle cannot carry: "
                                    f"{err}") from None
        self.seen.add(name)
        if found is not None:
            self.extra[found[0]] = found[1]

    def write(self, out_root: Path) -> Path:
        return write_reward_bundle(out_root, self.extra)
_IMPORT = re.compile(r"^(\s*)(from|import) vrag_data(?=[.\s])", re.M)

_ENTRY = '''"""{what}
Standard library only: the `vrag_reward` package beside this file is the reward code of vrag-data {version}.
Judge settings: README.md in this folder."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from vrag_reward.rewards.{module} import {names}  # noqa: E402

__all__ = [{quoted}]
'''
ENTRY_POINTS = {
    "compute_score.py": ("verl", ["compute_score"],
                         "verl (>= 0.9) entry point of this export: reward.custom_reward_function.path=reward/compute_score.py,\n"
                         "reward.custom_reward_function.name=compute_score. Returns a dict; verl rewards with its \"score\"."),
    "vragrl_reward.py": ("vragrl", ["compute_score", "total_score"],
                         "VRAG-RL's verl fork entry point of this export: custom_reward_function.path=reward/vragrl_reward.py,\n"
                         "custom_reward_function.name=compute_score (reward_model.reward_manager=rm). Returns a float."),
    "easyr1_reward.py": ("easyr1", ["REWARD_NAME", "REWARD_TYPE", "compute_score"],
                         "EasyR1 entry point of this export: worker.reward.reward_function=reward/easyr1_reward.py:compute_score\n"
                         "(a batch reward function: one dict with `overall` per input)."),
}

_README = """# Reward entry points

These files score rollouts of this export in the trainer's own environment. They need nothing beyond the Python
standard library (no pip install): `vrag_reward/` is the reward code of vrag-data {version}, generated for this export.

| trainer | settings (paths relative to the export folder: start the trainer there, or give absolute paths) |
|---|---|
| verl >= 0.9 | `reward.custom_reward_function.path=reward/compute_score.py reward.custom_reward_function.name=compute_score` (in `verl/config.yaml`) |
| VRAG-RL's verl fork | `custom_reward_function.path=reward/vragrl_reward.py custom_reward_function.name=compute_score reward_model.reward_manager=rm` |
| EasyR1 | `worker.reward.reward_function=reward/easyr1_reward.py:compute_score` (in `easyr1/data_config.yaml`) |

verl's `compute_score` returns a dict whose `score` is the reward (the other keys are the reward's components,
logged by verl). VRAG-RL's fork needs a float: its reward manager adds 0.7 x its own judge + 0.2 x NDCG to what
`vragrl_reward.compute_score` returns, which for VRAG-RL's reward is the format term (see `vrag_reward/rewards/vragrl.py`);
`vragrl_reward.total_score` is the whole reward as a float.

The answer term of the judged rewards (VRAG-RL, UniDoc-RL, VISOR, MM-Doc-R1) comes from a model judge asked over
HTTP (urllib): set `VRAG_JUDGE_URL` (an OpenAI-compatible base URL, e.g. `http://127.0.0.1:8001/v1`) and
`VRAG_JUDGE_MODEL` (`VRAG_JUDGE_API_KEY_ENV` names the variable holding its key; `VRAG_JUDGE_CACHE` a sqlite file
that keeps verdicts across workers), or score with the rule scorers by setting `VRAG_REWARD_JUDGE=rules` explicitly.
Neither set: the reward stops with one line. Under VRAG-RL's fork the judge is the fork's own (`reward_model.rm_url`).
"""


def _transform(text: str, source: str) -> str:
    head = f"# Generated from vrag_data/{source} (vrag-data {__version__}) for this export's reward bundle; do not edit.\n"
    return head + _IMPORT.sub(lambda m: f"{m.group(1)}{m.group(2)} {PACKAGE}", text)


def bundle_files(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Relative path under `reward/` -> text, for every file of the bundle (`extra`: the plugins' reward modules the
    rows name, `RewardBundle`)."""
    src = resources.files("vrag_data")
    files: dict[str, str] = {}
    for mod in REWARD_MODULES:
        rel = f"{mod}.py"
        if mod in _EMPTY_INIT:
            files[f"{PACKAGE}/{rel}"] = f'"""vrag-data {__version__}: the reward code an export ships (generated; do not edit)."""\n'
        else:
            files[f"{PACKAGE}/{rel}"] = _transform(src.joinpath(rel).read_text(encoding="utf-8"), rel)
    for name, (module, names, what) in ENTRY_POINTS.items():
        files[name] = _ENTRY.format(what=what, version=__version__, module=module, names=", ".join(names),
                                    quoted=", ".join(f'"{n}"' for n in names))
    files["README.md"] = _README.format(version=__version__)
    return {**files, **(extra or {})}


def write_reward_bundle(out_root: Path, extra: dict[str, str] | None = None) -> Path:
    """Write `<out_root>/reward/` (idempotent: the same files for the same installation and rows; files an older
    bundle left there, such as its `requirements.txt`, are removed). `extra`: the plugins' reward modules
    (`RewardBundle`)."""
    dest = out_root / "reward"
    files = bundle_files(extra)
    for rel, text in files.items():
        write_text(out_root, dest / rel, text)
    for p in sorted(dest.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        rel = p.relative_to(dest).as_posix()
        if p.is_file() and rel not in files:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return dest
