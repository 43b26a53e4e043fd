"""A run config checked completely before anything starts (no server, no workspace, no model call).

`check_run_config` stops at the first problem with one line naming the key and the fix: recipes known, every
recipe key of the config (`synth.recipe_options`, `filters.chains`, `filters.options`, `export.max_pixels`) a
registered recipe, each recipe's options valid for that recipe and its filter options for filters its chain
runs, the roles each recipe uses configured (its `roles`: policy, judge, grounding, ...; `same_as` naming a
configured role; the student its difficulty filters ask for: every missing role of every recipe in one line), every
endpoint URL well formed and its API-key variable set, input folders and the tasks file present. Reachability
of the endpoints is checked by the stages themselves (they call the servers before any work).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from pathlib import Path
from urllib.parse import urlparse

from vrag_data.config import RunConfig
from vrag_data.errors import ConfigError
from vrag_data.keys import KeyNotFound, resolve_key
from vrag_data.secrets import redact_url
from vrag_data.export.formats import check_format_names
from vrag_data.ingest.backends import get_backend
from vrag_data.recipe import check_recipe_keys, get_recipe, recipe_names, resolve_recipe
from vrag_data.recipe.registry import recipe_keyed
from vrag_data.teacher.roles import one_line, role_problems
from vrag_data.qgen.plan import run_vision_problem


def with_origins(message: str, origins: Mapping[str, str]) -> str:
    """`message` (a config problem) with where each config key it names came from when that is not the config file:
    `origins` maps a key (`roles.policy`, `synth.samples`) to what gave it (`--param endpoints.policy`, `--set ...`)."""
    notes = [f"{key} is from {origin}" for key, origin in origins.items()
             if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message)]
    return f"{message} ({'; '.join(notes)})" if notes else message


def set_origins(sets: Sequence[str], how: str = "--set") -> dict[str, str]:
    """The config keys `key=value` items set, each with the option that set it."""
    keys = [item.split("=", 1)[0].strip() for item in sets if "=" in item]
    return {k: f"{how} {k}=..." for k in keys if k}


def _local(path: str, base: Path) -> Path | None:
    if "://" in path:
        return None  # remote inputs are listed by the stage that reads them
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def check_run_config(cfg: RunConfig, source: str = "<config>", base: Path | None = None) -> None:
    """Raise ConfigError (one line: `<source>: <key>: <problem>; <fix>`) on the first problem found."""
    base = base or Path.cwd()

    def bad(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {problem}")

    if not cfg.synth.recipes:
        raise bad("synth.recipes", f"empty; name the recipes to run, e.g. [{', '.join(recipe_names())}]")
    for name in cfg.synth.recipes:
        if ":" in name:  # `package.module:ATTR`: imported and registered under its own name
            try:
                get_recipe(name)
            except ConfigError as err:
                raise bad(f"synth.recipes[{name}]", str(err)) from None
        elif name not in recipe_names():
            raise bad(f"synth.recipes[{name}]", f"unknown recipe; registered recipes: {', '.join(recipe_names())}")
    try:
        check_recipe_keys(cfg)  # every synth.recipe_options / filters.chains / filters.options / export.max_pixels key
        # options and filter overrides of every recipe the config names, run or not: a typo fails now, not later
        named = dict.fromkeys([*cfg.synth.recipes, *(n for m in recipe_keyed(cfg).values() for n in m)])
        recipes = {name: resolve_recipe(name, cfg) for name in named}
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    try:  # names only: no writer is imported here
        check_format_names(cfg.export.formats)
    except ConfigError as err:
        raise bad("export.formats", str(err)) from None
    # no stand-in: every role a recipe or its filters need is configured, or says whose role it plays (same_as); every
    # missing role of every requested recipe in one line, the policy's too, so a config is not fixed one run at a time
    problem = one_line(_role_lines(cfg, [recipes[name] for name in cfg.synth.recipes]))
    if problem:
        raise ConfigError(f"{source}: {problem}")
    if problem := run_vision_problem(cfg, [recipes[name] for name in cfg.synth.recipes]):  # roles shown pages
        raise ConfigError(f"{source}: {problem}")
    for role, rc in sorted(cfg.roles.items()):
        if rc.kind == "openai" and not rc.endpoints and not rc.same_as:
            raise bad(f"roles.{role}.endpoints", "empty; give at least one {base_url, model}")
        for i, ep in enumerate(rc.endpoints):
            url = urlparse(ep.base_url)
            if url.scheme not in ("http", "https") or not url.netloc:
                raise bad(f"roles.{role}.endpoints[{i}].base_url", f"{redact_url(ep.base_url)!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
            if not ep.model.strip():
                raise bad(f"roles.{role}.endpoints[{i}].model", "empty; name the served model")
            if ep.api_key_env:  # where the stage runs: its environment, then the key sources (`vrag_data.keys`)
                try:
                    resolve_key(ep.api_key_env, f"roles.{role}.endpoints[{i}].api_key_env")
                except KeyNotFound as err:
                    raise ConfigError(f"{source}: {err}") from None
    if not cfg.ingest.sample_corpus:
        for i, raw in enumerate(cfg.ingest.paths):
            p = _local(raw, base)
            if p is not None and not p.exists():
                raise bad(f"ingest.paths[{i}]", f"{p}: no such file or folder{_against(raw, base)}; fix the path or remove it")
    if cfg.tasks.file:
        p = _local(cfg.tasks.file, base)
        if p is not None and not p.is_file():
            raise bad("tasks.file", f"{p}: no such file{_against(cfg.tasks.file, base)}; point it at a QA file "
                      "(jsonl/json/csv) or remove the key")
    _check_tasks_source(cfg, base, bad)


def _role_lines(cfg: RunConfig, recipes: list[Any]) -> list[str]:
    """Every role problem: the policy (which drives every episode, whatever a recipe lists) first, then each role a
    requested recipe or its filters use that is missing, a broken `same_as` or of a kind that cannot play it."""
    lines = role_problems(recipes, cfg.roles)
    policy = cfg.roles.get("policy")
    if policy is None:
        first = "roles.policy: missing; set an endpoint (kind openai, endpoints: [{base_url, model}]) or {kind: oracle}"
    elif policy.kind not in ("openai", "oracle") or policy.same_as:
        first = f"roles.policy: kind {policy.kind!r} cannot drive episodes; use an endpoint (kind openai) or the oracle"
    else:
        return lines
    return [first, *(line for line in lines if not line.startswith("roles.policy:"))]


def _against(raw: str, base: Path) -> str:
    """Where a relative path was looked for: the caller's folder is not always the one it is resolved against."""
    return "" if "://" in raw or Path(raw).expanduser().is_absolute() else f" (relative paths resolve against {base})"


def _has_tasks(workspace: str, base: Path) -> bool:
    """Whether the workspace already holds task shards (`tasks import` / `tasks generate` run by hand)."""
    root = _local(workspace, base)
    return root is None or any((root / "tasks").glob("*.parquet"))  # a remote workspace is listed by the stage


def _check_tasks_source(cfg: RunConfig, base: Path, bad: Callable[[str, str], ConfigError]) -> None:
    """The tasks stage has an input: a QA file, the sample corpus's, generated questions (a writer and the layout
    blocks it picks evidence from) or tasks already in the workspace; else the run would ingest for minutes first."""
    from vrag_data.qgen.plan import planned_writer

    try:
        writer = planned_writer(cfg)
    except ConfigError as err:
        raise bad("tasks.generate.writer", str(err).split(": ", 1)[-1]) from None
    try:
        backend = get_backend(cfg.ingest.layout)
    except ValueError as err:
        raise bad("ingest.layout", str(err)) from None
    if writer is not None and not backend.block_sources:
        raise bad("tasks.generate", "generating questions needs layout blocks to pick evidence from, and ingest.layout "
                  "is off; set ingest.layout: pymupdf (or mineru)")
    if cfg.tasks.file or cfg.ingest.sample_corpus or writer is not None:
        return
    if cfg.ingest.paths and not _has_tasks(cfg.workspace, base):
        raise bad("tasks", "no tasks source for the documents of ingest.paths; set tasks.file (a QA file), or "
                  "roles.question_writer (an endpoint) to generate questions (tasks.generate), or tasks.generate.writer: "
                  "offline for the offline template writer, or run `vrag-data tasks generate` into the workspace first")
