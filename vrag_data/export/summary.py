"""What an export reports: `ExportSummary` (summary.json, the card, the CLI), the skipped records, the statistics
gathered on the way, and the workspace's note of an export written outside its exports/ folder."""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.export.conversation import Conversation
from vrag_data.report.sources import EXPORT_REGISTRY
from vrag_data.schema.records import SftRecord, Trajectory
from vrag_data.store import Workspace
from vrag_data.version import code_version

log = logging.getLogger(__name__)


class ExportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    out_dir: str
    formats: list[str]
    model_family: str
    n_trajectories: int = 0
    n_kept: int = 0
    counts: dict[str, dict[str, int]] = Field(default_factory=dict)  # format -> split/recipe -> records
    skipped: dict[str, int] = Field(default_factory=dict)  # reason code -> records
    warnings: list[str] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)


class Skips:
    """Records that could not be converted: counted per `<kind>:<reason code>`, listed in skipped.jsonl."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.rows: list[str] = []

    def add(self, kind: str, rec_id: str, code: str, reason: str) -> None:
        self.counts[f"{kind}:{code}"] += 1
        self.rows.append(json.dumps({"kind": kind, "id": rec_id, "reason_code": code, "reason": reason}, ensure_ascii=False))
        log.info("skipped %s record %s: %s", kind, rec_id, reason)

    def jsonl(self) -> str:
        return "".join(r + "\n" for r in self.rows)


class RunStats:
    """Counted during the SFT pass: statuses of every trajectory, provenance of the kept ones, shape of the records."""

    def __init__(self) -> None:
        self.per_status: Counter[str] = Counter()
        self.per_recipe: Counter[str] = Counter()
        self.turns: list[int] = []
        self.image_refs = self.boxes_ok = self.boxes_bad = 0
        self.targets: dict[str, Counter[str]] = {}  # recipe -> rendered / changed (see `vrag_data.export.targets`)
        self.models: dict[str, str] = {}
        self.cfg_hashes: set[str] = set()
        self.versions: set[str] = set()
        self.oracle = False
        self.task_ids: set[str] = set()  # the kept trajectories' tasks (the card's sources)
        self.recipe_of: dict[str, str] = {}  # every trajectory id -> its recipe (why some were dropped, per recipe)

    def kept(self, traj: Trajectory) -> None:
        self.task_ids.add(traj.task_id)
        prov = traj.provenance
        self.models.update(prov.models)
        self.oracle = self.oracle or prov.policy == "oracle"
        if prov.config_hash:
            self.cfg_hashes.add(prov.config_hash)
        if prov.code_version:
            self.versions.add(prov.code_version)

    def record(self, conv: Conversation, sft: SftRecord) -> None:
        self.per_recipe[sft.recipe] += 1
        self.turns.append(sum(1 for m in conv.turns if m.role == "assistant"))
        self.image_refs += len(sft.images)
        self.boxes_ok += conv.boxes_converted
        self.boxes_bad += conv.boxes_unconverted
        t = self.targets.setdefault(sft.recipe, Counter())
        t["rendered"] += conv.targets_rendered
        t["changed"] += conv.targets_changed

    def stats(self, image_files: int, images_written: int, rl_records: int) -> dict[str, Any]:
        return {
            "per_recipe": dict(self.per_recipe),
            "per_status": dict(self.per_status),
            "turns": {"min": min(self.turns, default=0), "max": max(self.turns, default=0),
                      "mean": statistics.fmean(self.turns) if self.turns else 0.0},
            "images": {"references": self.image_refs, "files": image_files, "written": images_written},
            "boxes_converted": self.boxes_ok,
            "boxes_unconverted": self.boxes_bad,
            # assistant targets rendered from their parse, and how many differ from the stored reply beyond whitespace
            "targets": {r: {"rendered": c["rendered"], "changed": c["changed"]} for r, c in sorted(self.targets.items())},
            "rl_records": rl_records,
        }

    def provenance(self, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "oracle": self.oracle, "models": self.models, "config_hashes": sorted(self.cfg_hashes),
                "code_versions": sorted(self.versions), "exporter_version": code_version()}


def register_export(ws: Workspace, out: Path) -> None:
    """An export written outside the workspace's exports/ names its folder there, so the report counts it."""
    if not ws.is_local:
        return
    exports = Path(ws.exports)
    folder = out.resolve()
    if folder.is_relative_to(exports.resolve()):
        return
    exports.mkdir(parents=True, exist_ok=True)
    reg = exports / EXPORT_REGISTRY
    line = json.dumps({"out_dir": str(folder)})
    if reg.is_file() and line in reg.read_text().splitlines():
        return
    with open(reg, "a") as fh:
        fh.write(line + "\n")
