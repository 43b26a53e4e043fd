"""`export_run`: one streaming pass over a run's kept trajectories (SFT), then one over its tasks (RL).

Images are materialised once into `<out>/images/`; each format writes its own shards as records arrive.
Records that cannot be converted are skipped with a counted reason (`skipped.jsonl`, the card, the summary).
"""

from __future__ import annotations

import io
import json
import logging
import os
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from vrag_data.config import ExportConfig
from vrag_data.errors import VragError
from vrag_data.export.card import render_card
from vrag_data.export.conversation import AlternationError, prompt_messages, trajectory_to_conversation, with_placeholders
from vrag_data.export.coords import DEFAULT_MAX_PIXELS, FAMILIES, RECIPE_MAX_PIXELS
from vrag_data.export.easyr1 import EasyR1Writer
from vrag_data.export.hf import HfWriter, push_to_hub
from vrag_data.export.images import BadImage, ImageStore, MissingImage
from vrag_data.export.io import write_json, write_text
from vrag_data.export.kept import Verdicts, iter_trajectories
from vrag_data.export.llamafactory import LlamaFactoryWriter
from vrag_data.export.rl import data_source_for, evidence_ground_truth, task_to_rl
from vrag_data.export.verl import VerlWriter
from vrag_data.schema.records import ChatTurn, ImageRef, Message, SftRecord, Task, Trajectory
from vrag_data.store import Workspace, read_records, read_table
from vrag_data.version import code_version

log = logging.getLogger(__name__)
FORMATS = ("hf", "llamafactory", "verl", "easyr1")


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


@dataclass
class _RlSource:
    recipe: str
    prompt: list[Message]
    evidence: list[str]
    sufficient: Any = None  # EVisRAG sufficiency label when the run recorded one


class _PageSizes:
    """Raw page sizes from the corpus table (one read), else from the image header."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.sizes: dict[str, tuple[int, int]] = {}
        try:
            t = read_table(ws.corpus_table("pages"))
            if t.num_rows and {"page_id", "width", "height"} <= set(t.column_names):
                for pid, w, h in zip(*(t.column(c).to_pylist() for c in ("page_id", "width", "height")), strict=True):
                    self.sizes[pid] = (int(w), int(h))
        except (FileNotFoundError, OSError):
            pass

    def __call__(self, page_id: str) -> tuple[int, int]:
        if page_id not in self.sizes:
            path = self.ws.page_image(page_id)
            if not self.ws.fs.exists(path):
                raise KeyError(page_id)
            with self.ws.fs.open(path, "rb") as f:
                self.sizes[page_id] = Image.open(io.BytesIO(f.read())).size
        return self.sizes[page_id]


class _Skips:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: Counter[str] = Counter()
        self.rows: list[str] = []

    def add(self, kind: str, rec_id: str, code: str, reason: str) -> None:
        self.counts[f"{kind}:{code}"] += 1
        self.rows.append(json.dumps({"kind": kind, "id": rec_id, "reason_code": code, "reason": reason}, ensure_ascii=False))
        log.info("skipped %s record %s: %s", kind, rec_id, reason)


def _max_pixels(recipe: str, cfg: ExportConfig) -> int:
    return int(cfg.max_pixels.get(recipe) or RECIPE_MAX_PIXELS.get(recipe, DEFAULT_MAX_PIXELS))


def _answer_evidence(traj: Trajectory) -> list[str]:
    for t in reversed(traj.turns):
        if t.action.kind == "answer":
            return list(t.action.evidence)
    return []


def export_run(
    ws: Workspace,
    run_id: str,
    formats: list[str] | tuple[str, ...] = FORMATS,
    out_dir: str | Path | None = None,
    model_family: str = "qwen2.5-vl",
    shard_size: int | None = None,
    config: ExportConfig | None = None,
    on_trajectory: Callable[[], None] | None = None,
) -> ExportSummary:
    cfg = config or ExportConfig()
    formats = list(dict.fromkeys(formats))
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise VragError(f"unknown export format(s) {bad}; choose from {list(FORMATS)}")
    if model_family not in FAMILIES:
        raise VragError(f"unknown model family {model_family!r}; choose from {list(FAMILIES)}")
    run_dir = ws.run(run_id)
    if not ws.fs.exists(run_dir):
        raise VragError(f"{run_dir}: run not found; list runs under {ws.runs} or run `vrag-data synth` first")
    if out_dir is None and not ws.is_local:
        raise VragError(f"{ws.root}: exports are written to a local folder; pass --out")
    out = Path(out_dir) if out_dir is not None else Path(ws.exports) / run_id
    out.mkdir(parents=True, exist_ok=True)
    size = int(shard_size or cfg.shard_size)

    summary = ExportSummary(run_id=run_id, out_dir=str(out), formats=formats, model_family=model_family)
    store = ImageStore(ws, out, model_family)
    pages = _PageSizes(ws)
    skips = _Skips(out / "skipped.jsonl")
    tasks = {t.task_id: t for t in read_records(ws.tasks, Task)}

    hf = HfWriter(out, size) if "hf" in formats else None
    lf = LlamaFactoryWriter(out, size, model_family) if "llamafactory" in formats else None

    verdicts = Verdicts.load(run_dir)
    if not verdicts.present:
        summary.warnings.append(f"{run_dir}/verdicts: no verdicts; every trajectory with status 'answered' is kept (run `vrag-data filter` first)")
    per_status: Counter[str] = Counter()
    per_recipe: Counter[str] = Counter()
    turns_per_rec: list[int] = []
    n_image_refs = 0
    boxes_ok = boxes_bad = 0
    models: dict[str, str] = {}
    cfg_hashes: set[str] = set()
    versions: set[str] = set()
    oracle = False
    rl_sources: dict[tuple[str, str], _RlSource] = {}

    for traj in iter_trajectories(run_dir):
        summary.n_trajectories += 1
        per_status[traj.status] += 1
        if on_trajectory:
            on_trajectory()
        if not verdicts.keep(traj):
            continue
        summary.n_kept += 1
        prov = traj.provenance
        models.update(prov.models)
        oracle = oracle or prov.policy == "oracle"
        if prov.config_hash:
            cfg_hashes.add(prov.config_hash)
        if prov.code_version:
            versions.add(prov.code_version)
        rl_sources.setdefault((traj.task_id, traj.recipe), _RlSource(traj.recipe, traj.prompt, _answer_evidence(traj), traj.extra.get("sufficient")))
        if hf is None and lf is None:
            continue
        mp = _max_pixels(traj.recipe, cfg)
        try:
            conv = trajectory_to_conversation(traj, model_family, mp, pages)
            images = [store.materialise(ref, mp) for ref in conv.images]
        except AlternationError as err:
            skips.add("sft", traj.traj_id, "alternation", str(err))
            continue
        except MissingImage as err:
            skips.add("sft", traj.traj_id, "missing_image", f"trajectory {traj.traj_id}: {err}")
            continue
        except BadImage as err:
            skips.add("sft", traj.traj_id, "bad_image", f"trajectory {traj.traj_id}: {err}")
            continue
        except Exception as err:  # noqa: BLE001 - one malformed record never stops the export
            skips.add("sft", traj.traj_id, "error", f"trajectory {traj.traj_id}: {type(err).__name__}: {err}")
            continue
        messages = ([ChatTurn(role="system", content=conv.system)] if conv.system else []) + conv.turns
        rec = SftRecord(
            id=traj.traj_id,
            recipe=traj.recipe,
            task_id=traj.task_id,
            traj_id=traj.traj_id,
            messages=messages,
            images=images,
            augmentation=str(traj.extra.get("augmentation") or ""),
            metadata={
                "status": traj.status,
                "sample": traj.sample,
                "policy": prov.policy,
                "model_family": model_family,
                "boxes_converted": conv.boxes_converted,
                "boxes_unconverted": conv.boxes_unconverted,
            },
        )
        per_recipe[traj.recipe] += 1
        turns_per_rec.append(sum(1 for m in conv.turns if m.role == "assistant"))
        n_image_refs += len(images)
        boxes_ok += conv.boxes_converted
        boxes_bad += conv.boxes_unconverted
        for w in (hf, lf):
            if w is not None:
                w.add_sft(rec, conv.system)

    if summary.n_kept == 0:
        summary.warnings.append(f"run {run_id}: no kept trajectories; the export has empty splits")

    # RL: one record per (task, recipe) with a kept trajectory
    verl = None
    if "verl" in formats:
        verl = VerlWriter(out, size, with_images=any(m.images for s in rl_sources.values() for m in s.prompt), image_mode=cfg.image_mode)
    er1 = EasyR1Writer(out, size) if "easyr1" in formats else None
    if er1 is not None and any(r != "evisrag" for _, r in rl_sources):
        summary.warnings.append("easyr1 rows built from non-evisrag recipes' prompts; EVisRAG's format expects the evisrag recipe")
    index = 0
    for (task_id, recipe), src in rl_sources.items():
        task = tasks.get(task_id)
        if task is None:
            skips.add("rl", f"{task_id}:{recipe}", "task_not_found", f"task {task_id}: not in {ws.tasks}; re-import the tasks of this run")
            continue
        mp = _max_pixels(recipe, cfg)
        prompt, refs = prompt_messages(src.prompt)
        try:
            images = [store.materialise(ref, mp) for ref in refs]
        except (MissingImage, BadImage) as err:
            code = "missing_image" if isinstance(err, MissingImage) else "bad_image"
            skips.add("rl", f"{task_id}:{recipe}", code, f"task {task_id}: {err}")
            continue
        rec = task_to_rl(task, prompt, images, recipe, index, data_source_for(task.benchmark, cfg.data_source_map, cfg.data_source_default), cfg.ability, [r.page_id for r in refs])
        index += 1
        if hf is not None:
            hf.add_rl(rec)
        if verl is not None:
            verl.add_rl(rec)
        if er1 is not None:
            _add_easyr1(er1, rec, task, prompt, refs, src, store, mp, skips)

    for name, w in (("hf", hf), ("llamafactory", lf), ("verl", verl), ("easyr1", er1)):
        if w is not None:
            summary.counts[name] = w.close()
    summary.skipped = dict(skips.counts)
    summary.stats = {
        "per_recipe": dict(per_recipe),
        "per_status": dict(per_status),
        "turns": {
            "min": min(turns_per_rec, default=0),
            "max": max(turns_per_rec, default=0),
            "mean": statistics.fmean(turns_per_rec) if turns_per_rec else 0.0,
        },
        "images": {"references": n_image_refs, "files": store.written + store.reused, "written": store.written},
        "boxes_converted": boxes_ok,
        "boxes_unconverted": boxes_bad,
        "rl_records": index,
    }
    summary.provenance = {
        "run_id": run_id,
        "oracle": oracle,
        "models": models,
        "config_hashes": sorted(cfg_hashes),
        "code_versions": sorted(versions),
        "exporter_version": code_version(),
    }
    write_text(out, out / "skipped.jsonl", "".join(r + "\n" for r in skips.rows))
    card = render_card(summary.model_dump())
    write_text(out, out / "README.md", card)
    if hf is not None:
        write_text(out, out / "hf" / "README.md", card)
        token = os.environ.get(cfg.hub_token_env or "")
        if cfg.hub_repo and token:
            push_to_hub(out, cfg.hub_repo, token)
    write_json(out, out / "summary.json", summary.model_dump(mode="json"))
    return summary


def _add_easyr1(er1: EasyR1Writer, rec, task: Task, prompt, refs, src: _RlSource, store: ImageStore, mp: int, skips: _Skips) -> None:  # noqa: ANN001
    # EVisRAG answers over the pages in its prompt; a prompt without images gets the gold pages instead
    er1_refs = refs or [ImageRef(page_id=p) for p in task.evidence_pages]
    try:
        er1_images = [store.materialise(ref, mp) for ref in er1_refs]
    except (MissingImage, BadImage) as err:
        code = "missing_image" if isinstance(err, MissingImage) else "bad_image"
        skips.add("easyr1", rec.id, code, f"task {task.task_id}: {err}")
        return
    system = "\n".join(m["content"] for m in prompt if m["role"] == "system")
    user = "\n".join(m["content"] for m in prompt if m["role"] != "system")
    if not refs:
        user = with_placeholders(user, len(er1_images))
    er1.add_row(
        task.split or "train",
        {
            "id": rec.id,
            "prompt": (system + "\n\n" + user) if system else user,
            "answer": evidence_ground_truth(task, [r.page_id for r in er1_refs], src.evidence),
            "image": er1_images,
            "data_source": rec.data_source,
            "task_id": task.task_id,
            "recipe": src.recipe,
            # read by vrag_data.rewards.easyr1 when the trainer passes row fields through
            "shown_pages": [r.page_id for r in er1_refs],
            "gold_pages": list(task.evidence_pages),
            "answer_format": task.answer_format or "",
            **({"sufficient": src.sufficient} if src.sufficient is not None else {}),
        },
    )
