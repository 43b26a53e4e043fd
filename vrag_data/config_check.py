"""A run config checked completely before anything starts (no server, no workspace, no model call).

`check_run_config` stops at the first problem with one line naming the key and the fix: recipes known, every
recipe key of the config (`synth.recipe_options`, `filters.chains`, `filters.options`, `export.max_pixels`) a
registered recipe, each recipe's options valid for that recipe and its filter options for filters its chain
runs, the roles each recipe needs configured (policy; the student its difficulty filters ask for), every
endpoint URL well formed and its API-key variable set, input folders and the tasks file present. Reachability
of the endpoints is checked by the stages themselves (they call the servers before any work).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from vrag_data.config import RunConfig
from vrag_data.errors import ConfigError
from vrag_data.export.formats import check_format_names
from vrag_data.recipe import check_recipe_keys, get_recipe, recipe_names, resolve_recipe
from vrag_data.recipe.registry import recipe_keyed
from vrag_data.student.stage import student_problem


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
    for name in cfg.synth.recipes:
        problem = student_problem(recipes[name].filters, cfg.roles)
        if problem:
            raise bad(name, problem)
    try:  # names only: no writer is imported here
        check_format_names(cfg.export.formats)
    except ConfigError as err:
        raise bad("export.formats", str(err)) from None
    policy = cfg.roles.get("policy")
    if policy is None:
        raise bad("roles.policy", "missing; set an endpoint (kind openai, endpoints: [{base_url, model}]) or {kind: oracle}")
    if policy.kind not in ("openai", "oracle"):
        raise bad("roles.policy", f"kind {policy.kind!r} cannot drive episodes; use an endpoint (kind openai) or the oracle")
    for role, rc in sorted(cfg.roles.items()):
        if rc.kind == "openai" and not rc.endpoints:
            raise bad(f"roles.{role}.endpoints", "empty; give at least one {base_url, model}")
        for i, ep in enumerate(rc.endpoints):
            url = urlparse(ep.base_url)
            if url.scheme not in ("http", "https") or not url.netloc:
                raise bad(f"roles.{role}.endpoints[{i}].base_url", f"{ep.base_url!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
            if not ep.model.strip():
                raise bad(f"roles.{role}.endpoints[{i}].model", "empty; name the served model")
            if ep.api_key_env and not os.environ.get(ep.api_key_env):
                raise bad(f"roles.{role}.endpoints[{i}].api_key_env", f"the variable {ep.api_key_env} is not set; export it")
    if not cfg.ingest.sample_corpus:
        for i, raw in enumerate(cfg.ingest.paths):
            p = _local(raw, base)
            if p is not None and not p.exists():
                raise bad(f"ingest.paths[{i}]", f"{p}: no such file or folder; fix the path or remove it")
    if cfg.tasks.file:
        p = _local(cfg.tasks.file, base)
        if p is not None and not p.is_file():
            raise bad("tasks.file", f"{p}: no such file; point it at a QA file (jsonl/json/csv) or remove the key")
