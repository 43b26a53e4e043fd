"""The reward entry points shipped inside an export (`<export>/reward/`), so a copied export scores rollouts in a
trainer environment that has no vrag-data installed.

The folder holds the modules `vrag_data.rewards.verl` / `.easyr1` import (the rewards, the action grammar, the
geometry and the record schema: their only requirement is pydantic), copied from this installation, and two
files to point the trainers at:

- verl / VRAG-RL's trainer: `custom_reward_function.path=reward/compute_score.py`, `.name=compute_score`;
- EasyR1: `worker.reward.reward_function=reward/easyr1_reward.py:compute_score`.

`REWARD_MODULES` is the import closure of the two entry points; a test checks it against a fresh interpreter.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from vrag_data.export.io import write_text

REWARD_MODULES = (
    "__init__",
    "env/__init__", "env/actions", "env/geometry", "env/grammar", "env/render", "env/tags",
    "rewards/__init__", "rewards/answer", "rewards/crop", "rewards/easyr1", "rewards/episode", "rewards/format",
    "rewards/judge_client", "rewards/judge_prompts", "rewards/recipes", "rewards/retrieval", "rewards/verl",
    "schema/__init__", "schema/geometry_types", "schema/records",
    "secrets",
)
REQUIREMENTS = "pydantic>=2.7,<3\n"

_SHIM = '''"""verl entry point of this export: custom_reward_function.path=reward/compute_score.py, .name=compute_score.
Loads the reward modules shipped beside this file (requirement: pydantic). Judge settings: see README.md."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vrag_data.rewards.verl import compute_score  # noqa: E402

__all__ = ["compute_score"]
'''

_EASYR1_SHIM = '''"""EasyR1 entry point of this export: worker.reward.reward_function=reward/easyr1_reward.py:compute_score.
Loads the reward modules shipped beside this file (requirement: pydantic). Judge settings: see README.md."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from vrag_data.rewards.easyr1 import REWARD_NAME, REWARD_TYPE, compute_score  # noqa: E402

__all__ = ["REWARD_NAME", "REWARD_TYPE", "compute_score"]
'''

_README = """# Reward entry points

These files score rollouts of this export in the trainer's own environment; nothing else from vrag-data is needed.

    pip install -r reward/requirements.txt      # pydantic only

- verl and VRAG-RL's trainer: `custom_reward_function.path=reward/compute_score.py custom_reward_function.name=compute_score`
- EasyR1: `worker.reward.reward_function=reward/easyr1_reward.py:compute_score`

Paths are relative to the export folder: start the trainer from there (or give the absolute path).

The answer term of the judged rewards (VRAG-RL, UniDoc-RL, VISOR, MM-Doc-R1) comes from a model judge: set
`VRAG_JUDGE_URL` and `VRAG_JUDGE_MODEL` (an OpenAI-compatible server; `VRAG_JUDGE_API_KEY_ENV` names the variable holding its key), or score with
the rule scorers by setting `VRAG_REWARD_JUDGE=rules` explicitly. Neither set: the reward stops with one line.
"""


def write_reward_bundle(out_root: Path) -> Path:
    """Write `<out_root>/reward/` (idempotent: the same files for the same installation)."""
    dest = out_root / "reward"
    src = resources.files("vrag_data")
    for mod in REWARD_MODULES:
        rel = f"vrag_data/{mod}.py"
        write_text(out_root, dest / rel, src.joinpath(f"{mod}.py").read_text(encoding="utf-8"))
    write_text(out_root, dest / "compute_score.py", _SHIM)
    write_text(out_root, dest / "easyr1_reward.py", _EASYR1_SHIM)
    write_text(out_root, dest / "requirements.txt", REQUIREMENTS)
    write_text(out_root, dest / "README.md", _README)
    return dest
