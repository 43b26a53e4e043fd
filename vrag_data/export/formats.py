"""Export formats: one registry, one writer module per format, one protocol.

`FORMATS` is the only list of formats: the config validates against it, `export_run` loops over it, and the
flows and the CLI name each format's folder and label from it. A writer gets SFT records (`add_sft`) when its
format trains on trajectories and RL items (`add_rl`) when it trains on task prompts; `close()` returns the
record counts per split or recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vrag_data.schema.records import ImageRef, RlRecord, SftRecord, Task

if TYPE_CHECKING:
    from vrag_data.config import ExportConfig
    from vrag_data.export.images import ImageStore


@dataclass
class RlItem:
    """One RL row in the making: the record every format shares, and what a format may need besides it."""

    rec: RlRecord
    task: Task
    prompt: list[dict[str, str]]  # chat messages with image placeholders
    refs: list[ImageRef]  # the prompt's images, in order
    recipe: str
    max_pixels: int
    evidence: list[str]  # the kept trajectory's evidence lines (one-turn evidence form)
    sufficient: Any = None  # sufficiency label when the run recorded one
    evidence_rows: bool = False  # the recipe's RL prompt is the one-turn evidence form (its target is the tagged one)


@dataclass
class WriterContext:
    out: Path
    shard_size: int
    family: str
    cfg: "ExportConfig"
    store: "ImageStore"
    skip: Callable[[str, str, str, str], None]  # (kind, record id, reason code, reason)
    hints: Any = None  # recipe -> export hints (`runner._Hints`)
    rl_with_images: bool = False  # RL prompts carry images (decided after the SFT pass)


class ExportWriter(Protocol):
    name: str

    def close(self) -> dict[str, int]: ...


class SftWriter(ExportWriter, Protocol):
    def add_sft(self, rec: SftRecord, system: str) -> None: ...


class RlWriter(ExportWriter, Protocol):
    def add_rl(self, item: RlItem) -> None: ...


@dataclass(frozen=True)
class ExportFormat:
    name: str
    label: str  # how a person calls it ("LLaMA-Factory")
    entry: str  # what to point the consumer at, relative to the export folder
    sft: bool
    rl: bool
    make: Callable[[WriterContext], "SftWriter | RlWriter"]


def _hf(ctx: WriterContext) -> Any:
    from vrag_data.export.hf import HfWriter

    return HfWriter(ctx.out, ctx.shard_size)


def _llamafactory(ctx: WriterContext) -> Any:
    from vrag_data.export.llamafactory import LlamaFactoryWriter

    return LlamaFactoryWriter(ctx.out, ctx.shard_size, ctx.family, ctx.hints)


def _verl(ctx: WriterContext) -> Any:
    from vrag_data.export.verl import VerlWriter

    return VerlWriter(ctx.out, ctx.shard_size, with_images=ctx.rl_with_images, image_mode=ctx.cfg.image_mode)


def _easyr1(ctx: WriterContext) -> Any:
    from vrag_data.export.easyr1 import EasyR1Writer

    return EasyR1Writer(ctx.out, ctx.shard_size, ctx.store, ctx.skip)


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("hf", "HF dataset", "hf", sft=True, rl=True, make=_hf),
        ExportFormat("llamafactory", "LLaMA-Factory", "llamafactory", sft=True, rl=False, make=_llamafactory),
        ExportFormat("verl", "verl parquet", "verl", sft=False, rl=True, make=_verl),
        ExportFormat("easyr1", "EasyR1 jsonl", "easyr1", sft=False, rl=True, make=_easyr1),
    )
}
FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)


def check_formats(formats: list[str] | tuple[str, ...]) -> list[str]:
    """The formats in order without repeats; ValueError naming an unknown one."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown export format(s) {bad}; choose from {list(FORMATS)}")
    return list(dict.fromkeys(formats))
