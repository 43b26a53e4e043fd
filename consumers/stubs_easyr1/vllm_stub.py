"""Import-only stand-in for vLLM in the EasyR1 check: EasyR1's config module imports its vLLM rollout worker, and
vLLM needs CUDA. The check reads data and rewards only; any use of a vLLM name raises."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


class _Unusable:
    def __init__(self, *a, **k):
        raise RuntimeError("vLLM is stubbed in the EasyR1 data check: rollouts cannot run here")


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Unusable,), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "vllm" or fullname.startswith("vllm."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Module(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        return None


def install() -> None:
    if "vllm" not in sys.modules:
        sys.meta_path.insert(0, _Finder())
