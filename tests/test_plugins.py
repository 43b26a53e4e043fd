"""The one discovery rule every plugin kind follows (`vrag_data.plugins`): a module in the kind's folder that holds
the registration line at its top level is imported without any list kept by hand (a reward or backend module ending
in `register_...(...)` used to be found only when a list named it), and an entry point naming a package imports that
package's modules the same way; a plugin's name is its own."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.support.plugin_site import site_package
from vrag_data.plugins import Registry, registering_modules, registers

PLUGIN = '''
    from kinds_registry import register_thing


    class {cls}:
        name = "{name}"


    {line}
'''


@pytest.fixture
def kinds(tmp_path, monkeypatch):
    """A package `fresh_kinds` with four modules: two end in the registration line (one as `X = register_thing(...)`),
    one only mentions it inside a function, one has none; and the registry module they import."""
    pkg = tmp_path / "fresh_kinds"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod, cls, name, line in (("alpha", "Alpha", "alpha", "register_thing(Alpha)"),
                                 ("beta", "Beta", "beta", "BETA = register_thing(Beta())"),
                                 ("gamma", "Gamma", "gamma", "def later():\n        register_thing(Gamma)"),
                                 ("delta", "Delta", "delta", "")):
        (pkg / f"{mod}.py").write_text(textwrap.dedent(PLUGIN.format(cls=cls, name=name, line=line)))
    (tmp_path / "kinds_registry.py").write_text(
        "REG = None\n\ndef register_thing(obj):\n    return REG.register(obj)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m.startswith(("fresh_kinds", "kinds_registry"))]:
        monkeypatch.delitem(sys.modules, m)
    return tmp_path


def _registry(**kw) -> Registry:
    import kinds_registry

    reg = Registry.of_class("thing", "test_things", type("Base", (), {}), call="register_thing", **kw)
    reg.accepts = lambda obj: hasattr(obj, "name")
    reg.make = lambda obj: obj() if isinstance(obj, type) else obj
    kinds_registry.REG = reg
    return reg


def test_registers_reads_a_top_level_registration_line_only():
    assert registers("x = 1\nregister_reward(Mine)\n", "register_reward")
    assert registers("REWARD = register_reward(Mine())\n", "register_reward")
    assert not registers("def f():\n    register_reward(Mine)\n", "register_reward")
    assert not registers("from x import register_reward\n", "register_reward")
    assert not registers("register_reward_later(Mine)\n", "register_reward")


def test_the_modules_of_a_folder_holding_the_line_are_found_without_a_list(kinds):
    assert registering_modules("fresh_kinds", "register_thing") == ["fresh_kinds.alpha", "fresh_kinds.beta"]
    reg = _registry(folder="fresh_kinds")
    assert reg.names() == ("alpha", "beta")  # gamma registers only when called, delta never
    assert "fresh_kinds.delta" not in sys.modules and "fresh_kinds.gamma" not in sys.modules


def test_an_entry_point_naming_a_package_imports_its_registering_modules(kinds, tmp_path):
    site = site_package(tmp_path / "dist", "fresh_kinds_dist", "test_things", "mine = fresh_kinds")
    sys.path.insert(0, str(site))
    try:
        reg = _registry()
        assert reg.names() == ("alpha", "beta")
        with pytest.raises(ValueError, match=r"^unknown thing 'gamma'; known: \['alpha', 'beta'\] \(a thing is added by a "
                                             r"module announced under the entry-point group 'test_things', calling "
                                             r"`register_thing\(\.\.\.\)`\)$"):
            reg.get("gamma")
    finally:
        sys.path.remove(str(site))
