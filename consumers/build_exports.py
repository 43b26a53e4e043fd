"""Build every recipe's export on the sample corpus (oracle policy, offline student), then copy the exports
to a new folder and delete the workspace: what the consumer checks read is a moved export with nothing
behind it.

    python consumers/build_exports.py <out>      ->  <out>/<recipe>/{llamafactory,verl,easyr1,hf,reward,...}
                                                     <out>/_for_vragrl/<recipe>/verl (`--for vragrl`)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.synth_workspace import cli, sample_workspace  # noqa: E402
from vrag_data.recipe import recipe_names  # noqa: E402


VRAGRL = "_for_vragrl"  # <out>/_for_vragrl/<recipe>: `--for vragrl` exports


def build(out: Path) -> list[str]:
    recipes = list(recipe_names())
    with tempfile.TemporaryDirectory(prefix="vrag-consumers-") as tmp:
        base = Path(tmp)
        ws = sample_workspace(base)
        student = base / "student.yaml"
        student.write_text("roles:\n  student: {kind: extractive}\n")
        staged = base / "exports"
        for recipe in recipes:
            run = f"oracle-{recipe}"
            cli("synth", "-w", ws, "--recipe", recipe, "--policy", "oracle", "--run", run, "-q")
            cli("filter", "-w", ws, "--run", run, "--config", student)
            cli("export", "-w", ws, "--run", run, "--out", staged / recipe,
                "--format", "hf", "--format", "llamafactory", "--format", "verl", "--format", "easyr1")
            # VRAG-RL's fork reads only embedded image bytes: the same run exported for it
            cli("export", "-w", ws, "--run", run, "--out", staged / VRAGRL / recipe, "--format", "verl", "--for", "vragrl")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staged, out)  # the workspace and the staged exports go away with `tmp`
    return recipes


if __name__ == "__main__":
    print(" ".join(build(Path(sys.argv[1]).resolve())))
