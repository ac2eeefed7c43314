"""A strict stand-in for Transformer Engine, so that Megatron-Bridge's configuration
code imports on a machine without a GPU (tests/support/bridge.py).

Why: Megatron-Bridge 0.3.1 imports ``transformer_engine.pytorch`` unconditionally at
module level in exactly two modules, ``megatron.bridge.peft.lora_layers`` (which
subclasses ``te.Linear`` and annotates with ``te.ops.Sequential``) and
``megatron.bridge.peft.lora``; ``megatron.bridge.training.config`` reaches both
through ``megatron.bridge.models`` and ``megatron.bridge.peft``. Transformer Engine
cannot be installed here: its wheels load CUDA libraries at import and its PyTorch
extension builds only against a CUDA toolkit. Every other importer of Transformer
Engine (Megatron-Core's and Bridge's own ``try: import transformer_engine`` probes)
must keep seeing it absent, as on a machine without it, or their ``HAVE_TE``
switches would change the configuration being validated.

What it stands in for, and nothing else:

* the modules ``transformer_engine`` and ``transformer_engine.pytorch``, served only
  to the importers in :data:`IMPORTERS`; to any other importer the finder raises
  ``ModuleNotFoundError``. The stand-in modules are taken out of ``sys.modules`` as
  soon as any other module is imported and when the importer has finished running,
  so they stay bound only in the importers' globals and a later ``import
  transformer_engine`` anywhere fails as it would without TE;
* the attributes in :data:`ATTRIBUTES` (``transformer_engine.pytorch.Linear``,
  ``transformer_engine.pytorch.ops`` and ``ops.Sequential``): placeholder classes
  that can be named and subclassed (what the two modules do while they are being
  imported), and nothing more.

Every use fails loudly with :class:`TransformerEngineUnavailable`: calling or
instantiating a placeholder or any subclass of it, ``isinstance`` / ``issubclass``
against it, comparing it (``==``, ``!=``), reading an attribute it does not define,
and reading any other attribute of the stand-in modules. So a validation path that
really touches Transformer Engine (LoRA layers, TE layer specs, FP8 recipes that
build TE objects) raises instead of passing vacuously.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

#: the modules allowed to import the stand-in (module-level, unconditional imports
#: in Megatron-Bridge 0.3.1)
IMPORTERS = frozenset({"megatron.bridge.peft.lora_layers", "megatron.bridge.peft.lora"})
#: the stand-in modules
MODULES = ("transformer_engine", "transformer_engine.pytorch")
#: the only attributes they define: module -> names (placeholder classes or submodules)
ATTRIBUTES = {"transformer_engine": {"pytorch"}, "transformer_engine.pytorch": {"Linear", "ops"}}
OPS_ATTRIBUTES = {"Sequential"}


class TransformerEngineUnavailable(RuntimeError):
    """Code under validation used Transformer Engine, which this machine cannot run."""


def _refuse(what: str) -> TransformerEngineUnavailable:
    return TransformerEngineUnavailable(
        f"{what}: Transformer Engine is not installed here (no GPU); tests/support/te_shim.py "
        f"stands in for it only so that Megatron-Bridge's configuration code imports. This "
        f"check touches Transformer Engine and cannot be verified on this machine.")


class _Placeholder(type):
    """Metaclass of the placeholder classes: defining a subclass works, every use raises."""

    def __call__(cls, *args, **kwargs):
        raise _refuse(f"instantiating {cls.__qualname__}")

    def __instancecheck__(cls, obj):
        raise _refuse(f"isinstance(..., {cls.__qualname__})")

    def __subclasscheck__(cls, sub):
        raise _refuse(f"issubclass(..., {cls.__qualname__})")

    def __eq__(cls, other):
        raise _refuse(f"comparing {cls.__qualname__}")

    def __ne__(cls, other):
        raise _refuse(f"comparing {cls.__qualname__}")

    __hash__ = type.__hash__

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)        # Python's own protocol probes (__wrapped__, ...)
        raise _refuse(f"{cls.__qualname__}.{name}")


class _Module(types.ModuleType):
    """A stand-in module: only its listed attributes exist; anything else raises."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise _refuse(f"{self.__name__}.{name}")


def _placeholder(qualname: str) -> type:
    return _Placeholder(qualname, (), {"__module__": "transformer_engine.pytorch",
                                       "__qualname__": qualname})


def _importer() -> str:
    """The module whose import statement is being served (the first frame outside importlib)."""
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
        f = f.f_back
    return "" if f is None else f.f_globals.get("__name__", "")


class _PurgingLoader(importlib.abc.Loader):
    """The real loader of a module of :data:`IMPORTERS`, which takes the stand-in out of
    ``sys.modules`` once that module has run: it stays bound only in its globals."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        try:
            self.real.exec_module(module)
        finally:
            purge()

    def __getattr__(self, name):         # get_source, get_filename, ... of the real loader
        return getattr(self.real, name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "transformer_engine":
            purge()                # another module is being imported: TE is absent again
            if name in IMPORTERS:
                spec = importlib.machinery.PathFinder.find_spec(name, path)
                if spec is not None and spec.loader is not None:
                    spec.loader = _PurgingLoader(spec.loader)
                return spec
            return None
        importer = _importer()
        if name in MODULES and importer in IMPORTERS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        raise ModuleNotFoundError(f"No module named {name!r} (Transformer Engine is not installed; "
                                  f"tests/support/te_shim.py serves only {sorted(IMPORTERS)})",
                                  name=name)

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        if module.__name__ == "transformer_engine.pytorch":
            ops = _Module("transformer_engine.pytorch.ops")
            ops.Sequential = _placeholder("ops.Sequential")
            module.Linear = _placeholder("Linear")
            module.ops = ops


_FINDER = _Finder()


def install() -> bool:
    """Put the stand-in in front of the import system; False (nothing installed) where
    a real Transformer Engine is importable."""
    if importlib.util.find_spec("transformer_engine") is not None:
        return False
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return True


def uninstall() -> None:
    """Remove the stand-in from the import system and ``sys.modules``."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    purge()


def purge() -> None:
    """Take the stand-in modules out of ``sys.modules`` (they stay bound only in the
    modules of :data:`IMPORTERS`)."""
    for name in MODULES:
        mod = sys.modules.get(name)
        if isinstance(mod, _Module):
            del sys.modules[name]
