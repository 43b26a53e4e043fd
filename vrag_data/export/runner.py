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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from vrag_data.config import ConfigError, ExportConfig
from vrag_data.env.geometry import FAMILIES
from vrag_data.errors import VragError
from vrag_data.export.card import render_card
from vrag_data.export.conversation import AlternationError, prompt_messages, trajectory_to_conversation
from vrag_data.export.formats import FORMAT_NAMES, FORMATS, RlItem, WriterContext, check_formats
from vrag_data.export.hf import push_to_hub
from vrag_data.export.images import BadImage, ImageStore, MissingImage
from vrag_data.export.io import write_json, write_text
from vrag_data.export.rl import data_source_for, evidence_ground_truth, task_to_rl
from vrag_data.recipe import get_recipe
from vrag_data.schema.records import ChatTurn, Message, SftRecord, Task, Trajectory
from vrag_data.store import Workspace, read_records, read_table
from vrag_data.report.sources import EXPORT_REGISTRY
from vrag_data.store.run import ExportLock, RunDir
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


def _answer_evidence(traj: Trajectory) -> list[str]:
    for t in reversed(traj.turns):
        if t.action.kind == "answer":
            return list(t.action.evidence)
    return []


class _Hints:
    """Each recipe's export hints: from the run manifest (what the run was made with), else from the registered
    recipe of that name; a recipe known to neither stops the export with one line."""

    def __init__(self, run: RunDir, cfg: ExportConfig) -> None:
        self.cfg = cfg
        self.by_recipe: dict[str, dict[str, Any]] = {}
        m = run.manifest()
        described = (m.config.get("recipe") or {}) if m is not None else {}
        if m is not None and isinstance(described.get("export"), dict):
            self.by_recipe[m.recipe] = {**described["export"], "reward": (described.get("reward") or {}).get("name"),
                                        "crop_min_pixels": (described.get("env") or {}).get("crop_min_pixels")}

    def __call__(self, recipe: str) -> dict[str, Any]:
        if recipe not in self.by_recipe:
            try:
                r = get_recipe(recipe)
                self.by_recipe[recipe] = {**r.export.describe(), "reward": r.reward.name, "crop_min_pixels": r.env.crop_min_pixels}
            except ConfigError as err:
                raise VragError(f"export hints of recipe {recipe!r}: {err}") from None
        return self.by_recipe[recipe]

    def crop_min_pixels(self, recipe: str) -> int | None:
        v = self(recipe).get("crop_min_pixels")
        return int(v) if v else None

    def coord_words(self, recipe: str) -> dict[str, str]:
        return dict(self(recipe).get("coord_words") or {})

    def max_pixels(self, recipe: str) -> int:
        return int(self.cfg.max_pixels.get(recipe) or self(recipe)["max_pixels"])

    def data_source(self, recipe: str, benchmark: str) -> str:
        default = self.cfg.data_source_default or self(recipe).get("data_source") or "rag"
        return data_source_for(benchmark, self.cfg.data_source_map, default)


def export_run(
    ws: Workspace,
    run_id: str,
    formats: list[str] | tuple[str, ...] = FORMAT_NAMES,
    out_dir: str | Path | None = None,
    model_family: str = "qwen2.5-vl",
    shard_size: int | None = None,
    config: ExportConfig | None = None,
    on_trajectory: Callable[[], None] | None = None,
) -> ExportSummary:
    cfg = config or ExportConfig()
    try:
        formats = check_formats(formats)
    except ValueError as err:
        raise VragError(str(err)) from None
    if model_family not in FAMILIES:
        raise VragError(f"unknown model family {model_family!r}; choose from {list(FAMILIES)}")
    run_dir = ws.run(run_id)
    run = RunDir(run_dir)
    if not run.exists():
        raise VragError(f"{run_dir}: run not found; list runs under {ws.runs} or run `vrag-data synth` first")
    state, why = run.verdict_state()
    if state == "stale":
        raise VragError(f"run {run_id}: the verdicts are out of date ({why}); run `vrag-data filter -w {ws.root} --run {run_id}` "
                        "before exporting")
    if out_dir is None and not ws.is_local:
        raise VragError(f"{ws.root}: exports are written to a local folder; pass --out")
    out = Path(out_dir) if out_dir is not None else Path(ws.exports) / run_id
    out.mkdir(parents=True, exist_ok=True)
    with ExportLock(out):
        return _export(ws, run, run_id, formats, out, model_family, int(shard_size or cfg.shard_size), cfg, state,
                       on_trajectory)


def _export(ws: Workspace, run: RunDir, run_id: str, formats: list[str], out: Path, model_family: str, size: int,
            cfg: ExportConfig, state: str, on_trajectory: Callable[[], None] | None) -> ExportSummary:
    run_dir = run.path

    summary = ExportSummary(run_id=run_id, out_dir=str(out), formats=formats, model_family=model_family)
    store = ImageStore(ws, out, model_family)
    pages = _PageSizes(ws)
    skips = _Skips(out / "skipped.jsonl")
    tasks = {t.task_id: t for t in read_records(ws.tasks, Task)}
    hints = _Hints(run, cfg)
    ctx = WriterContext(out, size, model_family, cfg, store, skips.add, hints=hints)
    sft_writers = [FORMATS[f].make(ctx) for f in formats if FORMATS[f].sft]

    verdicts = run.verdicts()
    if state == "missing":
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

    for traj in run.trajectories():
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
        if traj.prompt:  # the RL row of a task is built from a kept trajectory's prompt
            rl_sources.setdefault((traj.task_id, traj.recipe), _RlSource(traj.recipe, traj.prompt, _answer_evidence(traj), traj.extra.get("sufficient")))
        if not sft_writers:
            continue
        rec = _sft_record(traj, model_family, hints.max_pixels(traj.recipe), pages, store, skips, hints.coord_words(traj.recipe),
                          hints.crop_min_pixels(traj.recipe))
        if rec is None:
            continue
        conv, sft = rec
        per_recipe[traj.recipe] += 1
        turns_per_rec.append(sum(1 for m in conv.turns if m.role == "assistant"))
        n_image_refs += len(sft.images)
        boxes_ok += conv.boxes_converted
        boxes_bad += conv.boxes_unconverted
        for w in sft_writers:
            w.add_sft(sft, conv.system)

    if summary.n_kept == 0:
        summary.warnings.append(f"run {run_id}: no kept trajectories; the export has empty splits")

    # RL: one record per (task, recipe) with a kept trajectory
    ctx.rl_with_images = any(m.images for src in rl_sources.values() for m in src.prompt)
    rl_writers = [w for w in sft_writers if FORMATS[w.name].rl]
    rl_writers += [FORMATS[f].make(ctx) for f in formats if FORMATS[f].rl and not FORMATS[f].sft]
    if "easyr1" in formats:
        odd = sorted({r for _, r in rl_sources if not hints(r).get("evidence_rows")})
        if odd:
            summary.warnings.append(f"easyr1 rows of {odd}: EasyR1 has no agent loop (one response per prompt); their "
                                    "ground truth is JSON naming the recipe's own reward and what it reads")
    for recipe in sorted({r for _, r in rl_sources}):
        if "llamafactory" in formats and hints(recipe).get("sft") is None:
            summary.warnings.append(f"{recipe}: the recipe names no SFT hyper-parameters; the LLaMA-Factory yaml uses generic values")
    index = 0
    for (task_id, recipe), src in rl_sources.items():
        task = tasks.get(task_id)
        if task is None:
            skips.add("rl", f"{task_id}:{recipe}", "task_not_found", f"task {task_id}: not in {ws.tasks}; re-import the tasks of this run")
            continue
        mp = hints.max_pixels(recipe)
        prompt, refs = prompt_messages(src.prompt)
        try:
            images = [store.materialise(ref, mp) for ref in refs]
        except (MissingImage, BadImage) as err:
            code = "missing_image" if isinstance(err, MissingImage) else "bad_image"
            skips.add("rl", f"{task_id}:{recipe}", code, f"task {task_id}: {err}")
            continue
        sizes = {}
        for p in task.evidence_pages:
            try:
                sizes[p] = pages(p)
            except KeyError:
                pass  # a gold page without an image: its boxes cannot be converted, the reward scores what it can
        rec = task_to_rl(task, prompt, images, recipe, index, hints.data_source(recipe, task.benchmark), cfg.ability,
                         [r.page_id for r in refs], reward=(hints(recipe).get("reward") or recipe),
                         coord_space=model_family, max_pixels=mp, page_sizes=sizes)
        if hints(recipe).get("evidence_rows") and refs:
            # one-turn evidence recipes: the target holds the per-image gold evidence and the sufficiency-aware
            # answer, so the perception and derivation rewards have what they compare against
            shown = [r.page_id for r in refs]
            rec.reward_model.ground_truth = evidence_ground_truth(task, shown, src.evidence)
            rec.extra_info["sufficient"] = bool(task.evidence_pages) and set(task.evidence_pages) <= set(shown)
        index += 1
        item = RlItem(rec, task, prompt, refs, recipe, mp, src.evidence, src.sufficient,
                      evidence_rows=bool(hints(recipe).get("evidence_rows")))
        for w in rl_writers:
            w.add_rl(item)

    for w in sft_writers + [w for w in rl_writers if w not in sft_writers]:
        summary.counts[w.name] = w.close()
        if getattr(w, "files", None):
            summary.stats.setdefault("files", {})[w.name] = w.files
    summary.skipped = dict(skips.counts)
    summary.stats = {
        **summary.stats,
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
    if "hf" in formats:
        write_text(out, out / "hf" / "README.md", card)
        token = os.environ.get(cfg.hub_token_env or "")
        if cfg.hub_repo and token:
            push_to_hub(out, cfg.hub_repo, token)
    write_json(out, out / "summary.json", summary.model_dump(mode="json"))
    _register(ws, out)
    return summary


def _register(ws: Workspace, out: Path) -> None:
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


def reword_coords(text: str, words: Mapping[str, str], src_space: str, family: str) -> str:
    """`text` with the coordinate words of `src_space` replaced by those of `family`, so a prompt describes the
    boxes the exported record holds (a 0-1000 recipe exported for Qwen2.5-VL speaks pixels, and back)."""
    old, new = words.get(src_space), words.get(family)
    return text.replace(old, new) if old and new and old != new else text


def _sft_record(traj: Trajectory, family: str, mp: int, pages: _PageSizes, store: ImageStore,
                skips: _Skips, words: Mapping[str, str] | None = None,
                crop_min_pixels: int | None = None) -> tuple[Any, SftRecord] | None:
    try:
        conv = trajectory_to_conversation(traj, family, mp, pages)
        src_space = str(traj.extra.get("coord_space") or "")
        if words and src_space:
            conv.system = reword_coords(conv.system, words, src_space, family)
            conv.turns = [t.model_copy(update={"content": reword_coords(t.content, words, src_space, family)})
                          if t.role == "user" else t for t in conv.turns]
        images = [store.materialise(ref, mp, crop_min_pixels) for ref in conv.images]
    except AlternationError as err:
        skips.add("sft", traj.traj_id, "alternation", str(err))
        return None
    except MissingImage as err:
        skips.add("sft", traj.traj_id, "missing_image", f"trajectory {traj.traj_id}: {err}")
        return None
    except BadImage as err:
        skips.add("sft", traj.traj_id, "bad_image", f"trajectory {traj.traj_id}: {err}")
        return None
    except Exception as err:  # noqa: BLE001 - one malformed record never stops the export
        skips.add("sft", traj.traj_id, "error", f"trajectory {traj.traj_id}: {type(err).__name__}: {err}")
        return None
    messages = ([ChatTurn(role="system", content=conv.system)] if conv.system else []) + conv.turns
    prov = traj.provenance
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
            "model_family": family,
            "boxes_converted": conv.boxes_converted,
            "boxes_unconverted": conv.boxes_unconverted,
        },
    )
    return conv, rec
