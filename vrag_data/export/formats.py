"""Export formats as plugins: one `Format` protocol, one registry, one module per format.

A format is an object with a name, a label, the entry a consumer is pointed at, and four steps: `open` a writer
(`write_sft` / `write_rl` the records it takes, `close` -> what it wrote), its own `warnings`, its `card_section`
(how to use it, in the dataset card) and `publish` (after the card is written: its own card copy, an upload).
`export_run` loops over the selected formats and knows none of them by name.

A format is one module: a `Format` object and one `FORMAT = register_format(...)` line. Found by the one discovery
rule (`vrag_data.plugins`), the first time a format is named or listed: a module of `vrag_data/export/` holding that
line (this project's four), or one an installed package announces under the entry-point group
`vrag_data.export_formats` (a module that registers its format, or a `Format` object). This module imports no writer
at import time: the writers import it (for `RlItem` and the context), never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vrag_data.errors import ConfigError
from vrag_data.plugins import Registry
from vrag_data.schema.records import ImageRef, RlRecord, SftRecord, Task

if TYPE_CHECKING:
    from vrag_data.config import ExportConfig
    from vrag_data.export.images import ImageStore

ENTRY_POINT_GROUP = "vrag_data.export_formats"


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
class FormatContext:
    """What every format's steps may read: the export folder and the settings and services of this export."""

    out: Path
    shard_size: int
    family: str
    cfg: "ExportConfig"
    store: "ImageStore"
    skip: Callable[[str, str, str, str], None]  # (kind, record id, reason code, reason)
    hints: Callable[[str], dict[str, Any]]  # recipe name -> its export hints (`hints.RecipeHints`)
    # RL prompts carry images: known after the SFT pass, so only formats that take no SFT records (opened then) see it
    rl_with_images: bool = False
    # the trainer the rows are tuned for (`export --for`), None for none: a recipe's hints may refuse one (`not_for`)
    target: str | None = None
    # why the export may not be published as it is (licence unknown, research-only sources): a publish step refuses
    publish_problems: list[str] = field(default_factory=list)


@dataclass
class Written:
    """What a writer wrote: records per split (or recipe), and the files a card lists per split."""

    counts: dict[str, int]
    files: dict[str, list[str]] = field(default_factory=dict)  # relative to the format's folder
    splits: dict[str, dict[str, int]] = field(default_factory=dict)  # record type -> split -> records (the card's)
    warnings: list[str] = field(default_factory=list)  # what the writer left out and why (an empty split's config)
    # the rows name files of the export's image folder (paths relative to the export folder); False for a writer that
    # embeds the bytes or shows no image: when no format names them the export keeps no image folder
    names_image_files: bool = True
    image_folder: str = ""  # a folder of images inside the format's folder that its metadata files name (hf `folder`)


class FormatWriter(Protocol):
    def write_sft(self, rec: SftRecord, system: str) -> None: ...

    def write_rl(self, item: RlItem) -> None: ...

    def close(self) -> Written: ...


@runtime_checkable
class Format(Protocol):
    name: str  # what `--format` and `export.formats` say
    label: str  # how a person calls it ("LLaMA-Factory")
    entry: str  # what to point the consumer at, relative to the export folder
    sft: bool  # takes SFT records (the kept trajectories)
    rl: bool  # takes RL items (one task prompt per task and recipe)

    def open(self, ctx: FormatContext) -> FormatWriter: ...

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]: ...

    def card_section(self, written: Written) -> str: ...

    def publish(self, ctx: FormatContext, written: Written, card: str) -> None: ...


class FormatDefaults:
    """The optional steps, for formats that have nothing to add: no warnings, a one-line card section, no publish."""

    label: str
    entry: str
    # the splits whose SFT records the format writes (None: every split, each apart); the export makes no record,
    # and no image, that no selected format takes (LLaMA-Factory trains on `train` records only)
    sft_splits: tuple[str, ...] | None = None

    def warnings(self, ctx: FormatContext, recipes: Sequence[str]) -> list[str]:
        return []

    def image_dir(self, cfg: "ExportConfig") -> str | None:
        """Where the export's one image folder goes when this format is selected (relative to the export folder), for
        a format whose consumer needs the images inside its own folder; None: the default `images/`."""
        return None

    def card_section(self, written: Written) -> str:
        return f"- {self.label}: `{self.entry}`\n"

    def publish(self, ctx: FormatContext, written: Written, card: str) -> None:
        return None


DEFAULT_IMAGE_DIR = "images"


def image_dir(selected: Sequence[Format], cfg: "ExportConfig") -> str:
    """The export's one image folder: the first selected format's own (`image_dir`), else `images/`. Every format names
    its files by a path relative to the export folder, so copying the export (`cp -r`, `scp -r`, a zip) never
    duplicates an image."""
    for f in selected:
        own = getattr(f, "image_dir", None)
        folder = own(cfg) if callable(own) else None
        if folder:
            return folder
    return DEFAULT_IMAGE_DIR


def takes_sft_split(fmt: Format, split: str) -> bool:
    """Whether `fmt` writes SFT records of `split` (`sft_splits`, every split for a format that does not say)."""
    splits = getattr(fmt, "sft_splits", None)
    return splits is None or split in splits


FORMATS: Registry[Format] = Registry("export format", ENTRY_POINT_GROUP, lambda obj: isinstance(obj, Format), expected="Format",
                                     error=ConfigError, call="register_format", folder="vrag_data.export",
                                     same=lambda a, b: a is b)


def register_format(fmt: Format, *, replace: bool = False) -> Format:
    """Make `fmt` resolvable by its name; a name taken by another format is refused unless `replace`."""
    if not isinstance(fmt, Format):
        raise TypeError(f"{fmt!r} is not an export format: it needs name, label, entry, sft, rl, open, warnings, "
                        "card_section and publish (`vrag_data.export.formats.Format`)")
    if replace:
        FORMATS.unregister(fmt.name)
    try:
        return FORMATS.register(fmt)
    except ConfigError as err:
        raise ValueError(f"{err}; or pass replace=True to override it") from None


def unregister_format(name: str) -> None:
    FORMATS.unregister(name)


def format_names() -> list[str]:
    """Every known format name (the project's, installed packages', registered in code)."""
    return list(FORMATS.names())


def check_format_names(names: Sequence[str]) -> list[str]:
    """`names` in order without repeats; ConfigError (one line, naming the known formats) on an unknown one."""
    known = format_names()
    bad = [n for n in names if n not in known]
    if bad:
        raise ConfigError(f"unknown export format(s) {bad}; choose from: {', '.join(known) or 'none'} (a format is "
                          f"added by {FORMATS.how_to_add()})")
    return list(dict.fromkeys(names))


def get_format(name: str) -> Format:
    """The format `name` (one line naming the known ones otherwise)."""
    check_format_names([name])
    return FORMATS.get(name)


def resolve_formats(names: Sequence[str]) -> list[Format]:
    """The formats named, in order, checked before any is used (one line naming the known ones)."""
    return [get_format(n) for n in check_format_names(names)]


def all_formats() -> list[Format]:
    return [get_format(n) for n in format_names()]
