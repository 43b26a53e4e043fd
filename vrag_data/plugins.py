"""One registry shape for every extension point: names -> plugins of one kind (rewards, layout backends, filters).

A plugin is registered in code (`Registry.register`) or announced by an installed package under the registry's
entry-point group (loaded once, the first time a name is looked up, after the shipped ones): the entry point names a
plugin class or object, or a module whose import registers its plugins. A name taken by another plugin, an entry
point that cannot be loaded or that names neither, and an unknown name are each one line that names the fix.
Standard library only: the export's reward bundle carries this module.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Plugins of one kind by name.

    `kind` names the kind in messages ("reward", "layout backend"); `group` is the entry-point group; `accepts(obj)`
    says whether an entry point's object is a plugin of this kind; `make(obj)` turns it into what is stored (an
    instance of a class, or the object itself); `name_of(item)` reads its name; `check(item, items)` refuses one that
    clashes with the others (raises); `shipped()` registers the project's own plugins first; `error` is the exception
    type every message is raised as; `expected` names what a plugin must be ("Reward", "LayoutBackend")."""

    def __init__(self, kind: str, group: str, accepts: Callable[[object], bool], *, expected: str,
                 make: Callable[[Any], T] = lambda obj: obj, name_of: Callable[[T], str] = lambda item: str(getattr(item, "name", "")),
                 check: Callable[[T, dict[str, T]], None] | None = None, shipped: Callable[[], None] | None = None,
                 error: type[Exception] = ValueError) -> None:
        self.kind, self.group, self.accepts, self.expected, self.make, self.name_of = kind, group, accepts, expected, make, name_of
        self.check, self.shipped, self.error = check, shipped, error
        self.items: dict[str, T] = {}
        self.loaded = False

    @classmethod
    def of_class(cls, kind: str, group: str, base: type, **kw: Any) -> "Registry[Any]":
        """A registry of `base`'s instances: an instance or a subclass is accepted (a subclass is instantiated)."""
        return cls(kind, group, lambda obj: isinstance(obj, base) or (isinstance(obj, type) and issubclass(obj, base)),
                   expected=base.__name__, make=lambda obj: obj() if isinstance(obj, type) else obj, **kw)

    def register(self, obj: Any, name: str | None = None) -> T:
        """Register `obj` under `name` (default: its own); a name taken by a plugin of another type is refused."""
        if not self.accepts(obj):
            raise self.error(f"register {self.kind}: {obj!r} is not a {self.expected}; see {self.expected}'s docstring")
        item = self.make(obj)
        key = name or self.name_of(item)
        if not key:
            raise self.error(f"register {self.kind}: {obj!r} has no name; give it a `name`")
        held = self.items.get(key)
        if held is not None and _identity(held) is not _identity(item):
            raise self.error(f"register {self.kind}: the name {key!r} is taken by {_label(held)}; pick another name "
                             f"for {_label(item)}")
        if self.check is not None:
            self.check(item, {k: v for k, v in self.items.items() if k != key})
        self.items[key] = item
        return item

    def unregister(self, name: str) -> None:
        self.items.pop(name, None)

    def load(self) -> None:
        """The shipped plugins, then every entry point of the group (once)."""
        if self.loaded:
            return
        self.loaded = True
        if self.shipped is not None:
            self.shipped()
        for ep in metadata.entry_points(group=self.group):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - named in one line
                raise self.error(f"{self.kind} plugin {ep.name!r} ({ep.value}) failed to load: {exc}; fix or uninstall "
                                 "the package that declares it") from None
            if self.accepts(obj):
                self.register(obj, None if self.name_of(self.make(obj)) else ep.name)
            elif not isinstance(obj, types.ModuleType):  # a module registers its plugins when imported
                raise self.error(f"{self.kind} plugin {ep.name!r} ({ep.value}) is neither a {self.expected} nor a module; "
                                 f"point the entry point at a {self.expected}")

    def names(self) -> tuple[str, ...]:
        self.load()
        return tuple(sorted(self.items))

    def get(self, name: str) -> T:
        """The plugin `name`; an unknown name is one line naming the known ones."""
        self.load()
        try:
            return self.items[name]
        except KeyError:
            raise self.error(f"unknown {self.kind} {name!r}; known: {sorted(self.items)}") from None


def _identity(item: object) -> object:
    """What makes two registrations the same plugin: the class (a class, or an instance's class)."""
    return item if isinstance(item, type) else type(item)


def _label(item: object) -> str:
    return (item if isinstance(item, type) else type(item)).__qualname__
