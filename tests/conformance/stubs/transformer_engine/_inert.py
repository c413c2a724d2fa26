"""Inert placeholders for the parts of Transformer Engine the release only touches at import.

``install(root)`` adds a meta-path finder that makes every ``root.*`` submodule importable as a
module whose missing attributes are placeholder classes (one per dotted name, cached, so
``isinstance`` and subclassing are consistent). A placeholder raises when it is instantiated or
called. ``transformer_engine.pytorch.optimizers.FusedAdam`` is the one real definition: a class
whose ``__init__`` signature is that of TE >= 2.1 (what OptimizerConfig inspects).
"""

import importlib.abc
import importlib.machinery
import sys
import types

_ROOT = None
_CACHE = {}


class _InertMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}", cls.__module__)

    def __call__(cls, *args, **kwargs):
        if getattr(cls, "_te_stub_constructible", False):
            return super().__call__(*args, **kwargs)
        raise RuntimeError(
            f"{cls.__module__}.{cls.__qualname__} is part of the conformance suite's Transformer "
            "Engine stub; building or running TE modules needs the real package"
        )


class _Inert(metaclass=_InertMeta):
    """Base of every placeholder."""


def _placeholder(qualname, module):
    key = (module, qualname)
    if key not in _CACHE:
        cls = _InertMeta(qualname.rsplit(".", 1)[-1], (_Inert,), {"__module__": module})
        cls.__qualname__ = qualname
        _CACHE[key] = cls
    return _CACHE[key]


def attribute(module, name):
    value = _placeholder(name, module.__name__)
    setattr(module, name, value)
    return value


class _FusedAdam:
    """transformer_engine.pytorch.optimizers.FusedAdam: only its signature is real."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 adam_w_mode=True, weight_decay=0.0, amsgrad=False, set_grad_none=True,
                 capturable=False, master_weights=False, master_weight_dtype=None,
                 exp_avg_dtype=None, exp_avg_sq_dtype=None, use_decoupled_grad=False,
                 store_param_remainders=False):
        raise RuntimeError("FusedAdam is part of the conformance suite's Transformer Engine stub")


_DEFINED = {"pytorch.optimizers": {"FusedAdam": _FusedAdam}}


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []  # every stub module is a package: any submodule may be asked for
        module.__getattr__ = lambda name, _m=module: _module_getattr(_m, name)
        return module

    def exec_module(self, module):
        rel = module.__name__[len(_ROOT) + 1:]
        for name, value in _DEFINED.get(rel, {}).items():
            value.__module__ = module.__name__
            setattr(module, name, value)


def _module_getattr(module, name):
    if name.startswith("__"):
        raise AttributeError(name)
    return attribute(module, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(_ROOT + "."):
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


def install(root):
    global _ROOT
    if _ROOT is None:
        _ROOT = root
        sys.meta_path.insert(0, _Finder())
