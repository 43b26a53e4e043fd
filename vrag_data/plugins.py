"""One registry shape for every extension point: names -> plugins of one kind (recipes, roles, rewards, filters,
layout backends, export formats), and one discovery rule for all of them.

Discovery (`discover`), the first time a name is looked up:
1. the kind's own folder (`Registry.folder`, a package such as `vrag_data.rewards.kinds`): every module in it whose
   source holds the kind's registration line at its top level (`register_reward(...)`, `X = register_reward(...)`)
   is imported; no list of modules is kept by hand, so a new module with its one line is found;
2. the kind's entry-point group (`vrag_data.rewards`, ...) of every installed distribution: an entry point names a
   plugin (a class or object, registered under its own name) or a module; a module is imported, and when it is a
   package, its modules holding the registration line are imported as in 1.
A plugin's name comes from the plugin itself (its class's `name`), once: an entry point's own name is only a label.
A name taken by another plugin, an entry point that cannot be loaded or that names neither, and an unknown name are
each one line that names the fix. Standard library only: the export's reward bundle carries this module.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import types
from collections.abc import Callable
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def registers(source: str, call: str) -> bool:
    """Whether module `source` holds the registration line `call(...)` (or `NAME = call(...)`) at its top level."""
    return re.search(rf"^(?:[A-Za-z_]\w*\s*=\s*)?{re.escape(call)}\(", source, re.M) is not None


def registering_modules(package: str, call: str) -> list[str]:
    """The modules of `package` (one level) whose source holds the registration line `call(...)`, sorted by name."""
    pkg = importlib.import_module(package)
    out = []
    for info in sorted(pkgutil.iter_modules(getattr(pkg, "__path__", [])), key=lambda i: i.name):
        name = f"{package}.{info.name}"
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if info.ispkg or not origin or not origin.endswith(".py"):
            continue
        with open(origin, encoding="utf-8") as fh:
            if registers(fh.read(), call):
                out.append(name)
    return out


def discover(group: str, call: str, accept: Callable[[object, str], None], folder: str | None = None,
             error: type[Exception] = ValueError, kind: str = "plugin") -> None:
    """The one discovery rule (see the module docstring): the modules of `folder` holding `call(...)`, then the
    entry points of `group`; `accept(obj, label)` takes an entry point's object when it is not a module (`label`
    names the entry point for its messages)."""
    for name in registering_modules(folder, call) if folder else ():
        importlib.import_module(name)
    for ep in metadata.entry_points(group=group):
        try:
            obj = ep.load()
            if isinstance(obj, types.ModuleType):  # a module registers its plugins when imported; a package's modules too
                for name in registering_modules(obj.__name__, call) if hasattr(obj, "__path__") else ():
                    importlib.import_module(name)
                continue
        except Exception as exc:  # noqa: BLE001 - named in one line
            raise error(f"{kind} plugin {ep.name!r} ({ep.value}) failed to load: {exc}; fix or uninstall the package "
                        "that declares it") from None
        accept(obj, f"{kind} plugin {ep.name!r} ({ep.value})")


class Registry(Generic[T]):
    """Plugins of one kind by name.

    `kind` names the kind in messages ("reward", "layout backend"); `group` is the entry-point group; `call` the
    registration function a module calls (`register_reward`), `folder` the package whose modules calling it are the
    project's own (`discover`); `accepts(obj)` says whether an entry point's object is a plugin of this kind;
    `make(obj)` turns it into what is stored (an instance of a class, or the object itself); `name_of(item)` reads
    its name; `check(item, items)` refuses one that clashes with the others (raises); `shipped()` registers plugins
    that live in no module of their own first; `error` is the exception type every message is raised as;
    `expected` names what a plugin must be ("Reward", "LayoutBackend"); `same(a, b)` says whether two registrations
    under one name are the same plugin (default: the same class)."""

    def __init__(self, kind: str, group: str, accepts: Callable[[object], bool], *, expected: str,
                 make: Callable[[Any], T] = lambda obj: obj, name_of: Callable[[T], str] = lambda item: str(getattr(item, "name", "")),
                 check: Callable[[T, dict[str, T]], None] | None = None, shipped: Callable[[], None] | None = None,
                 error: type[Exception] = ValueError, call: str = "", folder: str | None = None,
                 same: Callable[[T, T], bool] | None = None) -> None:
        self.kind, self.group, self.accepts, self.expected, self.make, self.name_of = kind, group, accepts, expected, make, name_of
        self.check, self.shipped, self.error, self.call, self.folder = check, shipped, error, call, folder
        self.same = same or (lambda a, b: _identity(a) is _identity(b))
        self.items: dict[str, T] = {}
        self.loaded = False

    @classmethod
    def of_class(cls, kind: str, group: str, base: type, **kw: Any) -> "Registry[Any]":
        """A registry of `base`'s instances: an instance or a subclass is accepted (a subclass is instantiated)."""
        return cls(kind, group, lambda obj: isinstance(obj, base) or (isinstance(obj, type) and issubclass(obj, base)),
                   expected=base.__name__, make=lambda obj: obj() if isinstance(obj, type) else obj, **kw)

    def register(self, obj: Any) -> T:
        """Register `obj` under its own name; a name taken by another plugin is refused."""
        if not self.accepts(obj):
            raise self.error(f"register {self.kind}: {obj!r} is not a {self.expected}; see {self.expected}'s docstring")
        item = self.make(obj)
        key = self.name_of(item)
        if not key:
            raise self.error(f"register {self.kind}: {obj!r} has no name; give it a `name`")
        held = self.items.get(key)
        if held is not None and not self.same(held, item):
            raise self.error(f"register {self.kind}: the name {key!r} is taken by {_label(held)}; pick another name "
                             f"for {_label(item)}")
        if self.check is not None:
            self.check(item, {k: v for k, v in self.items.items() if k != key})
        self.items[key] = item
        return item

    def unregister(self, name: str) -> None:
        self.items.pop(name, None)

    def load(self) -> None:
        """The plugins of no module, then the kind's folder and entry points (`discover`), once."""
        if self.loaded:
            return
        self.loaded = True
        if self.shipped is not None:
            self.shipped()
        discover(self.group, self.call or "register", self._accept_entry, self.folder, self.error, self.kind)

    def _accept_entry(self, obj: object, label: str) -> None:
        if not self.accepts(obj):
            raise self.error(f"{label} is neither a {self.expected} nor a module; point the entry point at a "
                             f"{self.expected} or at the module that registers it")
        self.register(obj)

    def how_to_add(self) -> str:
        """How a plugin of this kind is added (for one-line errors)."""
        where = f"a module in {self.folder.replace('.', '/')}/ or " if self.folder else ""
        return f"{where}a module announced under the entry-point group {self.group!r}, calling `{self.call}(...)`"

    def names(self) -> tuple[str, ...]:
        self.load()
        return tuple(sorted(self.items))

    def get(self, name: str) -> T:
        """The plugin `name`; an unknown name is one line naming the known ones."""
        self.load()
        try:
            return self.items[name]
        except KeyError:
            raise self.error(f"unknown {self.kind} {name!r}; known: {sorted(self.items)} (a {self.kind} is added by "
                             f"{self.how_to_add()})") from None


def _identity(item: object) -> object:
    """What makes two registrations the same plugin: the class (a class, or an instance's class)."""
    return item if isinstance(item, type) else type(item)


def _label(item: object) -> str:
    return (item if isinstance(item, type) else type(item)).__qualname__
