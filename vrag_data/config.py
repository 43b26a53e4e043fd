"""Run configuration: YAML validated by pydantic with `extra="forbid"` (unknown keys fail before work).

Each stage owns one section. Secrets never live here: a role names the environment variable that holds
its API key (`api_key_env`), and the resolved config written next to a run contains only that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, field_validator,
                      model_serializer, model_validator)

from vrag_data.errors import ConfigError
from vrag_data.ingest.options import IngestOptions
from vrag_data.schema.records import SPLIT_PATTERN
from vrag_data.schema.roles import LIBRARY_ROLES, is_role, role_names  # noqa: F401  (LIBRARY_ROLES re-exported)
from vrag_data.secrets import register_url_secrets
from vrag_data.yamlio import read_yaml_mapping

# Upper bounds of the counts a run is asked for: a value past them is a typo (an extra digit, a pasted id), and
# the stage refuses it in one line before any work instead of planning (or paying for) it.
MAX_SAMPLES = 1024  # rollouts per task (the papers sample 1-16)
MAX_TASKS = 10_000_000  # tasks to generate, load or shard

def known_roles() -> list[str]:
    """The library's roles, then every registered role (`vrag_data.schema.roles`: the registry discovers them itself,
    so the answer does not depend on what was imported before)."""
    return role_names()


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EndpointConfig(Section):
    base_url: str
    model: str
    api_key_env: str | None = None  # name of the env var holding the key; never the key itself
    max_in_flight: int = Field(256, ge=1, le=65_536)

    @field_validator("base_url")
    @classmethod
    def _register_url_secrets(cls, v: str) -> str:
        register_url_secrets(v)  # credentials in the URL (userinfo, query) are redacted from any text from now on
        return v


class SamplingConfig(Section):
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(1024, ge=1, le=1 << 20)
    seed: int | None = None  # per request the teacher gets seed + sample index, so samples differ
    stop: list[str] = Field(default_factory=list)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # server-specific fields, e.g. vLLM's top_k


class RoleParameter(EndpointConfig):
    """One role as a deployment parameter gives it (`endpoints: {"policy": {...}}`): its endpoint, and any of the role's
    own settings a config can hold (`RoleConfig`), so nothing a config can say about a role needs the config file."""

    vision: bool | None = None
    timeout_s: float | None = Field(None, gt=0, le=86_400)
    max_retries: int | None = Field(None, ge=0, le=100)
    backoff_s: float | None = Field(None, ge=0, le=3600)
    backoff_max_s: float | None = Field(None, ge=0, le=86_400)
    sampling: SamplingConfig | None = None

    def as_role(self) -> dict[str, Any]:
        """The `roles.<role>` section it stands for: kind openai, this endpoint, the role settings it gives."""
        endpoint = set(EndpointConfig.model_fields)
        given = self.model_dump(mode="json", exclude_unset=True)
        return {"kind": "openai", "same_as": None, "endpoints": [{k: v for k, v in given.items() if k in endpoint}],
                **{k: v for k, v in given.items() if k not in endpoint}}


def _jsonish(v: Any) -> Any:
    return v.model_dump(mode="json") if isinstance(v, BaseModel) else v


class RoleConfig(Section):
    # openai: an endpoint; oracle: the gold-guided offline policy; rules: the rule scorers (judge);
    # extractive: the offline student that reads retrieved page text (not gold-guided)
    kind: Literal["openai", "oracle", "rules", "extractive"] = "openai"
    endpoints: list[EndpointConfig] = Field(default_factory=list)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    timeout_s: float = Field(120.0, gt=0, le=86_400)
    max_retries: int = Field(6, ge=0, le=100)
    backoff_s: float = Field(0.5, ge=0, le=3600)  # first retry waits up to this (full jitter), doubling per attempt
    backoff_max_s: float = Field(30.0, ge=0, le=86_400)
    # Another role's name (e.g. `policy`): this role IS that role (its kind, endpoints and settings), on
    # purpose. The substitution is recorded in the run manifest, the verdicts, the report and the dataset
    # card; a role a recipe uses and the config leaves out stops the stage instead (no silent stand-in).
    same_as: str | None = None
    # whether the model reads images: unset, a role that is shown page images is judged by its model's name
    # (`vrag_data.teacher.vision`); true for a served alias or a vision model the name check does not know; false
    # is refused on a role that is shown page images
    vision: bool | None = None

    @model_serializer(mode="wrap")
    def _unset_vision_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # unset, `vision` is left out of a dump: the ids hashed from a role's settings (run ids, stage keys) stay
        out = handler(self)
        if self.vision is None:
            out.pop("vision", None)
        return out

    @model_validator(mode="before")
    @classmethod
    def _same_as_alone(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("same_as") is not None:
            # a dumped config (the run manifest) writes every field at its default: only settings that differ count
            defaults = cls().model_dump(mode="json")
            own = sorted(k for k, v in data.items() if k != "same_as" and _jsonish(v) != defaults.get(k, object()))
            if own:
                raise ValueError(f"same_as: {data['same_as']}: a role that is another role has no settings of its own "
                                 f"({', '.join(own)}); remove them, or remove same_as and configure the role")
        return data


class IngestConfig(IngestOptions):
    """The run config's `ingest:` section: every ingest setting (`IngestOptions`, the one settings model the CLI
    and the flows share: dpi, layout, OCR, page caps, `strict`, `max_page_pixels`, the MinerU tier, ...) plus
    where the documents come from and how the flows shard them."""

    paths: list[str] = Field(default_factory=list)  # PDFs, images or folders
    sample_corpus: int | None = None  # generate a synthetic corpus of N docs when set
    sample_seed: int = 0
    docs_per_shard: int = Field(8, ge=1)

    def options(self) -> IngestOptions:
        """The ingest settings alone (what `ingest_paths` takes)."""
        return IngestOptions.model_validate(self.model_dump(include=set(IngestOptions.model_fields)))


class GenerateConfig(Section):
    """`vrag-data tasks generate`: question synthesis from the ingested pages (vrag_data.qgen)."""

    n: int = Field(default=20, ge=1, le=MAX_TASKS)  # tasks to keep
    min_share: float = Field(default=0.8, ge=0.0, le=1.0)  # fewer than min_share x n tasks: the stage failed (exit 3)
    kinds: list[Literal["single", "multi_page", "cross_doc"]] = Field(
        default_factory=lambda: ["single", "multi_page", "cross_doc"])
    types: list[Literal["extraction", "logic"]] = Field(default_factory=lambda: ["extraction", "logic"])
    sources: list[Literal["text", "table", "chart", "figure", "layout"]] = Field(
        default_factory=lambda: ["text", "table", "chart", "figure", "layout"])
    seed: int = 0
    max_attempts: int | None = Field(None, ge=1, le=10 * MAX_TASKS)  # default: 6 x n
    concurrency: int = Field(default=8, ge=1, le=1024)  # attempts in flight (writer and verifier requests)
    min_block_chars: int = Field(2, ge=0, le=100_000)  # layout blocks with less text are not picked as evidence
    search_top_k: int = Field(5, ge=1, le=100)  # BM25 pages per question for the ambiguity check
    ambiguity_pages: int = Field(3, ge=0, le=50)  # non-evidence pages shown to the verifier
    dedup_threshold: float = Field(0.8, ge=0.0, le=1.0)  # question-token Jaccard that counts as a near-duplicate
    max_pixels: int = Field(1_003_520, ge=3136, le=1 << 28)  # image budget per page shown to the writer and verifier
    split: str = Field(default="train", pattern=SPLIT_PATTERN)
    # who writes the questions when the flows (`vrag-data run`, the synth deployment) generate tasks: `model` =
    # roles.question_writer (an endpoint); `offline` = the template writer over extracted tables and sample-corpus
    # facts, only when asked for here (recorded in each task's provenance and the stage's manifest). Unset: the
    # model writer when roles.question_writer is configured, else no generation (a tasks.file or the sample corpus)
    writer: Literal["model", "offline"] | None = None


class TasksConfig(Section):
    file: str | None = None  # a QA file to import; None with sample_corpus = its qa.jsonl
    format: Literal["corpus", "mmlongbench", "slidevqa", "vrag", "financebench"] = "corpus"
    # split stored on every imported task (`tasks import --split`): `test` for a benchmark's test set, whose records an
    # export keeps out of every training file
    split: str = Field(default="train", pattern=SPLIT_PATTERN)
    limit: int | None = Field(None, ge=1, le=MAX_TASKS)
    generate: GenerateConfig = Field(default_factory=GenerateConfig)


class IndexConfig(Section):
    # hybrid = BM25 + dense (+ ColPali when model_path is set), fused by reciprocal rank fusion
    retriever: Literal["bm25", "dense", "hybrid", "colpali"] = "bm25"
    model_path: str | None = None  # local ColPali/ColQwen weights
    dense_model: str | None = None  # local sentence-transformers folder; None = the bundled all-MiniLM-L6-v2
    weights: dict[str, float] = Field(default_factory=dict)  # hybrid: component name -> RRF weight (default 1)
    rrf_k: float = Field(60.0, gt=0, le=1e6)
    normalize_queries: bool = True  # answer-format clauses out, FY2019 -> 2019, abbreviations, tickers, metrics


# Every map keyed by recipe name (`synth.recipe_options`, `filters.chains`, `filters.options`, `export.max_pixels`)
# is checked against the registered recipes by `vrag_data.recipe.registry.check_recipe_keys` (config_check and
# resolve_recipe run it before any work); the options themselves by each recipe's own options model.


class SynthConfig(Section):
    recipes: list[str] = Field(default_factory=list)  # registered recipe names (`vrag-data recipes` lists them)
    samples: int = Field(1, ge=1, le=MAX_SAMPLES)  # rollouts per task
    limit: int | None = Field(None, ge=1, le=MAX_TASKS)
    concurrent_episodes: int = Field(64, ge=1, le=4096)
    tasks_per_shard: int = Field(32, ge=1, le=MAX_TASKS)
    seed: int = 0
    # message text (images excluded) one episode may send, summed over its requests; the call that would pass it
    # ends the episode with status "budget" (a runaway conversation costs no more); null = no bound
    max_episode_request_bytes: int | None = Field(default=8 << 20, ge=1, le=1 << 30)
    # recipe -> its options, validated by that recipe's `RecipeOptions` subclass, e.g. {<recipe>: {max_turns: 10}}
    recipe_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_global_budget(cls, data: Any) -> Any:
        # a global budget used to override every recipe's own (a paper's 10 turns silently became 8)
        if isinstance(data, dict) and "max_turns" in data:
            raise ValueError("max_turns: there is no global turn budget; each recipe has its own, set it per recipe "
                             "with synth.recipe_options.<recipe>.max_turns (free turns, then one forced-answer turn)")
        return data


class FiltersConfig(Section):
    chains: dict[str, list[str]] = Field(default_factory=dict)  # recipe -> filter names (overrides the recipe's chain)
    # recipe -> filter -> option -> value, applied over the recipe's settings of that filter
    options: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    # the RL-data chain (which tasks become RL rows, in which order), the same shapes: it may run a filter the SFT
    # chain also runs (a difficulty rule of its own), so its options have their own key
    rl_chains: dict[str, list[str]] = Field(default_factory=dict)
    rl_options: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _options_under_recipe(cls, data: Any) -> Any:
        # the old shape `filters.options.<filter>.<option>` applied to every recipe; name the new place instead
        for field_name in ("options", "rl_options"):
            opts = data.get(field_name) if isinstance(data, dict) else None
            for key, val in (opts or {}).items() if isinstance(opts, dict) else ():
                if isinstance(val, dict) and any(not isinstance(v, dict) for v in val.values()):
                    raise ValueError(f"{field_name}.{key}: filter options live under their recipe: "
                                     f"filters.{field_name}.<recipe>.{key}.<option>")
        return data


# the built-in formats (entry points `vrag_data.export_formats`); the names are checked where the export is resolved
# (`config_check`, `export_run`, the CLI), so the config does not import the export's registry
DEFAULT_EXPORT_FORMATS = ("hf", "llamafactory", "verl", "easyr1")


class ExportConfig(Section):
    formats: list[str] = Field(default_factory=lambda: list(DEFAULT_EXPORT_FORMATS))  # `vrag_data.export.formats`
    model_family: Literal["qwen2.5-vl", "qwen3-vl"] = "qwen2.5-vl"
    hub_repo: str | None = None
    hub_token_env: str = "HF_TOKEN"
    shard_size: int = Field(default=1000, ge=1, le=MAX_TASKS)  # records per output shard
    # verl `images` entries: a path relative to the export folder, or embedded bytes (VRAG-RL's fork reads only bytes)
    image_mode: Literal["path", "bytes"] = "path"
    data_source_map: dict[str, str] = Field(default_factory=dict)  # benchmark -> verl data_source (VRAG-RL names)
    data_source_default: str | None = None  # None: the recipe's export hint
    ability: str = "fact-reasoning"
    max_pixels: dict[str, int] = Field(default_factory=dict)  # recipe -> image budget (default: the recipe's export hint)
    # RL validation set (verl `val_files`, EasyR1 `val_files`): this share of the train tasks, drawn by task id and
    # seed, is held out of the training files (tasks whose own split is not "train" are validation already)
    val_share: float = Field(default=0.1, ge=0.0, lt=1.0)
    val_seed: int = 0
    # HF images: `folder` (default) writes hf/ in `datasets`' image-folder layout, each distinct image once in
    # hf/data/images/ (a hard link to images/), so hf/ loads from any working directory and as a plain copy; `embed`
    # puts the bytes in the parquet shards (each distinct image once per shard: a page several configs or splits show
    # is stored in each); `reference` names the export's images/ file (loads only from the export folder)
    hf_images: Literal["folder", "embed", "reference"] = "folder"
    # the pages an RL episode may retrieve: `copy` puts the index and the page images in search/ (serve them with
    # `vrag-data serve-search -w search`), `recipe` writes only how to serve them from the workspace
    search_pages: Literal["copy", "recipe"] = "copy"
    # the card's licence (an SPDX id such as cc-by-4.0); `push_to_hub` refuses an export without one
    license: str | None = None
    # document stem or benchmark name -> its licence, for the card; a licence naming "research" is research-only
    source_licenses: dict[str, str] = Field(default_factory=dict)
    allow_research_only: bool = False  # `push_to_hub` publishes research-only or unknown-licence sources only then


class RunnerConfig(Section):
    """How the Prefect flows run their shard tasks (flows/): in threads here, or on a Ray cluster."""

    kind: Literal["local", "ray"] = "local"
    ray_address: str | None = None  # None with kind ray = a local Ray instance (loopback, temporary folder)
    max_concurrency: int = Field(default=4, ge=1)  # shard tasks in flight at once
    retries: int = Field(default=2, ge=0)  # per shard task, on top of the first attempt
    retry_delay_s: float = Field(default=5.0, ge=0)  # first retry delay; doubles per attempt (with jitter)


class RunConfig(Section):
    workspace: str = "workspace"
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    roles: dict[str, RoleConfig] = Field(default_factory=dict)
    synth: SynthConfig = Field(default_factory=SynthConfig)
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)


_BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, optional, or as the items of a list or dict)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def allowed_range(setting: str | Sequence[Any], model: type[BaseModel] | None = None) -> str | None:
    """The allowed range of a numeric setting (`synth.samples` -> "1..1024"), from its field's bounds; None when it
    has none. List indices and dict keys (a role's name) in the path are stepped over."""
    parts = setting.split(".") if isinstance(setting, str) else list(setting)
    cls: type[BaseModel] | None = model or RunConfig
    field = None
    for part in parts:
        if cls is None:
            return None
        if isinstance(part, str) and part in cls.model_fields:
            field = cls.model_fields[part]
            cls = _model_in(field.annotation)
        else:
            continue  # an index into a list, a key into a dict: the items' model stays
    if field is None:
        return None
    lo = hi = None
    for m in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">")):
            if getattr(m, attr, None) is not None:
                lo = (sign, getattr(m, attr))
        for attr, sign in (("le", "<="), ("lt", "<")):
            if getattr(m, attr, None) is not None:
                hi = (sign, getattr(m, attr))
    fmt = lambda v: f"{v:_}" if isinstance(v, int) and abs(v) >= 10_000 else f"{v:g}"  # noqa: E731
    if lo and hi and lo[0] == ">=" and hi[0] == "<=":
        return f"{fmt(lo[1])}..{fmt(hi[1])}"
    text = " and ".join(f"{s} {fmt(v)}" for s, v in (b for b in (lo, hi) if b))  # one side only: ">= 0"
    return text or None


def out_of_range(setting: str, value: Any, flag: str | None = None) -> str:
    """One line naming the setting, its allowed range and the fix."""
    rng = allowed_range(setting) or "see the config reference"
    how = f"{flag} N or --set {setting}=N" if flag else f"--set {setting}=N or the config file"
    return f"{setting} = {value} is out of range (allowed: {rng}); pass a value in range ({how})"


def check_bound(setting: str, value: Any, flag: str | None = None) -> None:
    """ConfigError (one line, exit 2) when `value` breaks `setting`'s bounds: for a value that reaches a stage
    without passing through the config model (a CLI flag such as `--samples`, a keyword argument)."""
    if value is None:
        return
    parts = setting.split(".")
    data: dict[str, Any] = {}
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    try:
        RunConfig.model_validate(data)
    except ValidationError as err:
        if any(e["type"] in _BOUND_ERRORS for e in err.errors()):
            raise ConfigError(out_of_range(setting, value, flag)) from None
        raise ConfigError(_one_line(err, flag or setting)) from None


def _one_line(err: ValidationError, source: str) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] in _BOUND_ERRORS:  # the range and the fix, not pydantic's half of it
            parts.append(out_of_range(loc, e.get("input")))
            continue
        # a validator's own message already names the key and the fix; pydantic's "Value error, " adds nothing
        msg = str(e["ctx"]["error"]) if e["type"] == "value_error" and "error" in e.get("ctx", {}) else e["msg"]
        parts.append(f"{loc}: {msg}")
    return f"{source}: invalid config: " + "; ".join(parts)


def parse_config(data: dict[str, Any], source: str = "<config>") -> RunConfig:
    try:
        cfg = RunConfig.model_validate(data or {})
    except ValidationError as err:
        raise ConfigError(_one_line(err, source)) from None
    if not all(is_role(name) for name in cfg.roles):
        known = known_roles()
        bad_roles = sorted(set(cfg.roles) - set(known))
        if bad_roles:
            raise ConfigError(f"{source}: unknown role(s) {bad_roles}; known roles: {known} (a recipe brings a role by "
                              "registering it: `register_role(RoleSpec(...))`)")
    return cfg


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], source: str) -> dict[str, Any]:
    """`key.sub=value` items (the CLI's `--set`) over a config mapping, before validation: the value is parsed as YAML
    (`3`, `0.5`, `true`, `null`, `[a, b]`, `{k: v}`; anything else stays a string), a dotted key walks mappings
    (created when missing) and list indices (`roles.policy.endpoints.0.base_url=...`). A misspelled key is left to
    the validation, which names it."""
    import copy

    import yaml

    out = copy.deepcopy(data or {})
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {item!r}: use --set key.sub=value (e.g. --set synth.samples=2)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            where = ".".join(parts[: i + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"--set {key}: {where}: no item {part} in a list of {len(node)} in {source}")
                node = node[int(part)]
            elif isinstance(node, dict):
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
            else:
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i])} is a value, not a section, in {source}")
        last = parts[-1]
        if isinstance(node, list):
            if not last.isdigit() or int(last) >= len(node):
                raise ConfigError(f"--set {key}: no item {last} in a list of {len(node)} in {source}")
            node[int(last)] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"--set {key}: {'.'.join(parts[:-1])} is a value, not a section, in {source}")
    return out


def _with_sets(source: str, overrides: Sequence[str]) -> str:
    return f"{source} with --set {' '.join(overrides)}" if overrides else source


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """The run config in `path` (the defaults when None) with `--set key=value` overrides applied before validation."""
    if path is None and not overrides:
        return RunConfig()
    data = read_yaml_mapping(path, "config", "configs/") if path is not None else {}
    source = str(path) if path is not None else "<defaults>"
    return parse_config(apply_overrides(data, overrides, source), _with_sets(source, overrides))


def dump_resolved(cfg: RunConfig) -> dict[str, Any]:
    """The replayable config written next to every run. Contains env var names, never secret values."""
    return cfg.model_dump(mode="json")
