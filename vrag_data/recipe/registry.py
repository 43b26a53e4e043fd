"""Recipe names -> recipes, filled by registration.

A recipe module registers its recipe with one `RECIPE = register(...)` line. Registration is validation: the reward,
every filter of its chains and every role it names must be registered in their registries (`vrag_data.rewards`,
`vrag_data.filters`, `vrag_data.schema.roles`), else `register` stops with one line naming the missing part and how to
register it. Recipes are found by the one discovery rule (`vrag_data.plugins`): modules announced under the
`vrag_data.recipes` entry-point group (a package there: each of its modules holding a `register(...)` line; this
project's `pipelines/` is announced so in `pyproject.toml`), imported the first time a name is looked up. Only entry
points (CLI, flows, trainer) resolve names; the stages get the resolved object.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from vrag_data.config import ConfigError, RunConfig
from vrag_data.env.grammar import register_grammar
from vrag_data.plugins import discover
from vrag_data.recipe.base import Recipe
from vrag_data.schema.extra_keys import declaration_problem

ENTRY_POINT_GROUP = "vrag_data.recipes"
_RECIPES: dict[str, Recipe] = {}
_loaded = False


def register(recipe: Recipe, *, replace: bool = False) -> Recipe:
    """Make `recipe` resolvable by its name (and its grammar by the grammar's name), once its reward, filters and roles
    are registered (`missing_part`: ConfigError with one line otherwise)."""
    old = _RECIPES.get(recipe.name)
    if old is not None and old is not recipe and not replace:
        raise ValueError(f"recipe {recipe.name!r} is already registered ({old.paper}); pass replace=True to override it")
    problem = missing_part(recipe)
    if problem:
        raise ConfigError(f"register recipe {recipe.name}: {problem}")
    register_grammar(recipe.grammar)
    _RECIPES[recipe.name] = recipe
    return recipe


def unregister(name: str) -> None:
    _RECIPES.pop(name, None)


def missing_part(recipe: Recipe) -> str:
    """The first reward, filter or role `recipe` names that is not registered (as the class it uses), with how to
    register it; "" when every part is."""
    from vrag_data.filters.registry import REGISTRY as FILTERS, known_filters
    from vrag_data.schema.roles import ROLES, is_role
    from vrag_data.rewards.registry import REWARDS, known_rewards

    if recipe.reward.name not in known_rewards():
        return (f"reward {recipe.reward.name!r} is not registered (known: {', '.join(known_rewards())}); add it as "
                f"{REWARDS.how_to_add()}")
    for chain in (recipe.filters, recipe.rl_filters):
        for f in chain:
            cls = known_filters().get(f.name)
            if cls is None or not isinstance(f, cls):
                held = f" (the name is taken by {cls.__name__})" if cls is not None else ""
                return (f"filter {f.name!r} ({type(f).__name__}) is not registered{held}; add it as "
                        f"{FILTERS.how_to_add()}")
    declared = declaration_problem(recipe.extra_keys)
    if declared:
        return declared
    for spec in recipe.roles:
        if not is_role(spec.name):
            return (f"role {spec.name!r} is not registered; add `register_role(RoleSpec({spec.name!r}, ...))` in the "
                    f"recipe's module, or {ROLES.how_to_add()}")
    return ""


def _announced(obj: object, label: str) -> None:
    if not isinstance(obj, Recipe):
        raise ConfigError(f"{label} is neither a Recipe nor a module; point the entry point at the module that registers "
                          "the recipe")
    if _RECIPES.get(obj.name) is not obj:
        register(obj)


def _load_installed() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    discover(ENTRY_POINT_GROUP, "register", _announced, error=ConfigError, kind="recipe")


def recipe_names() -> list[str]:
    _load_installed()
    return sorted(_RECIPES)


def get_recipe(name: str, options: Mapping[str, Any] | None = None) -> Recipe:
    """The recipe `name` configured with `options` (`synth.recipe_options.<name>`); one-line error otherwise.
    `package.module:ATTR` names a recipe object in any importable module (a recipe of your own, no packaging): it
    is imported, registered under its own name and returned."""
    _load_installed()
    if ":" in name:
        return _by_reference(name).configure(options) if options else _by_reference(name)
    recipe = _RECIPES.get(name)
    if recipe is None:
        known = ", ".join(sorted(_RECIPES)) or "none (is the project installed? `pip install -e .` registers its recipes)"
        raise ConfigError(f"unknown recipe {name!r}; choose one of: {known}")
    return recipe.configure(options) if options else recipe


def _by_reference(ref: str) -> Recipe:
    module, _, attr = ref.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"recipe {ref!r} cannot be loaded: {err}; is its module importable (installed, or on PYTHONPATH)?") from None
    if not isinstance(obj, Recipe):
        raise ConfigError(f"recipe {ref!r} is a {type(obj).__name__}, not a Recipe")
    current = _RECIPES.get(obj.name)
    if current is None:
        register(obj)
    elif current is not obj:
        raise ConfigError(f"recipe {ref!r} is named {obj.name!r}, which another registered recipe already uses; rename it")
    return obj


def recipe_keyed(cfg: RunConfig) -> dict[str, Mapping[str, Any]]:
    """The run config's maps keyed by recipe name, by their config key."""
    return {"synth.recipe_options": cfg.synth.recipe_options, "filters.chains": cfg.filters.chains,
            "filters.options": cfg.filters.options, "filters.rl_chains": cfg.filters.rl_chains,
            "filters.rl_options": cfg.filters.rl_options, "export.max_pixels": cfg.export.max_pixels}


def check_recipe_keys(cfg: RunConfig, also: Sequence[str] = ()) -> None:
    """Every recipe key of a run config names a registered recipe (or one of `also`, a recipe object resolved
    without registration); otherwise one line naming the key and the registered recipes."""
    known = set(recipe_names()) | set(also)
    for key, mapping in recipe_keyed(cfg).items():
        for name in mapping:
            if name not in known:
                raise ConfigError(f"{key}.{name}: not a registered recipe; registered recipes: {', '.join(sorted(known))}")


def resolve_recipe(recipe: "Recipe | str", cfg: RunConfig | None = None) -> Recipe:
    """The recipe configured by a run config (`RunConfig`): `synth.recipe_options.<name>` over its own options
    (its own turn budget unless `max_turns` is set there), `filters.chains.<name>` and `filters.options.<name>`.
    The config is checked whole whichever recipe is asked for: every recipe key names a registered recipe and the
    options and filter overrides of every recipe it names are valid for that recipe (a typo for a recipe this
    command does not run fails now, not in the next run that selects it). Entry points call this once and pass the
    object down. A recipe object is configured the same way (options over its own)."""
    base = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if cfg is None:
        return base
    check_recipe_keys(cfg, also=(base.name,))
    for name in dict.fromkeys(n for m in recipe_keyed(cfg).values() for n in m):
        if name != base.name:
            _configured(get_recipe(name), cfg)
    return _configured(base, cfg)


def _configured(base: Recipe, cfg: RunConfig) -> Recipe:
    name = base.name
    options = cfg.synth.recipe_options.get(name)
    configured = base.configure(options) if options else base
    return configured.with_filter_options(cfg.filters.chains.get(name), cfg.filters.options.get(name),
                                          cfg.filters.rl_chains.get(name), cfg.filters.rl_options.get(name))


def all_recipes() -> dict[str, Recipe]:
    return {name: get_recipe(name) for name in recipe_names()}

